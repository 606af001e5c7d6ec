"""fp8sim.cublaslt_plan: the algorithm cuBLASLt runs for ``torch._scaled_mm``, asked of cuBLASLt.

On a machine with an NVIDIA GPU, ``query(m, n, k, ...)`` builds the very descriptors that
PyTorch's ``at::cuda::blas::scaled_gemm`` builds for ``torch._scaled_mm(a, b, scale_a,
scale_b, bias=..., out_dtype=..., use_fast_accum=...)`` (a: M x K row-major, b: K x N
column-major), asks ``cublasLtMatmulAlgoGetHeuristic`` for one algorithm as torch does, and
reads that algorithm's configuration with ``cublasLtMatmulAlgoConfigGetAttribute``: algo id,
tile, stages, split-K count, reduction scheme, custom option, cluster shape, CTA swizzling,
inner shape, and the workspace it needs. It calls, through ctypes, the libcublasLt that torch
itself has loaded (found in /proc/self/maps), so the answer is the one of torch's cuBLASLt.

The call replicated (PyTorch 2.11, aten/src/ATen/native/cuda/ScaledBlas.cpp ``_scaled_gemm``
-> aten/src/ATen/cuda/CUDABlas.cpp ``scaled_gemm``): torch calls cuBLASLt column-major with
its operands swapped (``cublasCommonArgs`` with a row-major result), so cuBLASLt's A is our
b (N x K, ``transa='t'``, ld K) and its B our a (``transb='n'``, K x M, ld K); cuBLASLt's m
is our N and its n our M; compute CUBLAS_COMPUTE_32F, scale type CUDA_R_32F; the A/B scale
pointers (cuBLASLt's A scale is our scale_b) with A/B scale modes (tensor: SCALAR_32F, row:
OUTER_VEC_32F, 1x128 blocks: VEC128_32F, 128x128 blocks: BLK128x128_32F), the D scale
pointer for FP8 outputs with scale_result; CUBLASLT_MATMUL_DESC_FAST_ACCUM as int8; C laid
out in the bias dtype (the output dtype when there is no bias, f16 for FP8 outputs), D in the
output dtype, both N x M with ld N; with a bias, epilogue BIAS, the bias pointer and its data
type; the preference only CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = torch's cuBLASLt
workspace (``CUBLASLT_WORKSPACE_SIZE`` KiB when set, else 1 MiB); one result requested.

    >>> from fp8sim import cublaslt_plan
    >>> cublaslt_plan.query(64, 64, 65536, "f32", use_fast_accum=True)["split_k"]  # doctest: +SKIP
    22

Everything here raises ``PlanUnavailable`` (a RuntimeError) with one line when there is no
GPU, no torch, no cuBLASLt, or when the heuristic returns no algorithm.
"""
from __future__ import annotations

import ctypes
import os
import threading
from typing import Any, Optional

__all__ = ["query", "versions", "PlanUnavailable", "SCALE_MODES", "trace_algo", "same_choice"]


class PlanUnavailable(RuntimeError):
    """cuBLASLt's plan cannot be asked here (no GPU, no cuBLASLt, or no algorithm)."""


def _names(s: str) -> dict:
    return {int(k): v for k, v in (item.split(":", 1) for item in s.split())}


# Enum names from CUDA 13's cublasLt.h (ids are stable across 13.x; an unknown id is shown
# as its number).
_TILES = _names(
    "0:UNDEFINED 1:8x8 2:8x16 3:16x8 4:8x32 5:16x16 6:32x8 7:8x64 8:16x32 9:32x16 10:64x8 "
    "11:32x32 12:32x64 13:64x32 14:32x128 15:64x64 16:128x32 17:64x128 18:128x64 19:64x256 "
    "20:128x128 21:256x64 22:64x512 23:128x256 24:256x128 25:512x64 26:64x96 27:96x64 28:96x128 "
    "29:128x160 30:160x128 31:192x128 32:128x192 33:128x96 34:32x256 35:256x32 36:8x128 "
    "37:8x192 38:8x256 39:8x320 40:8x384 41:8x448 42:8x512 43:8x576 44:8x640 45:8x704 46:8x768 "
    "47:16x64 48:16x128 49:16x192 50:16x256 51:16x320 52:16x384 53:16x448 54:16x512 55:16x576 "
    "56:16x640 57:16x704 58:16x768 59:24x64 60:24x128 61:24x192 62:24x256 63:24x320 64:24x384 "
    "65:24x448 66:24x512 67:24x576 68:24x640 69:24x704 70:24x768 71:32x192 72:32x320 73:32x384 "
    "74:32x448 75:32x512 76:32x576 77:32x640 78:32x704 79:32x768 80:40x64 81:40x128 82:40x192 "
    "83:40x256 84:40x320 85:40x384 86:40x448 87:40x512 88:40x576 89:40x640 90:40x704 91:40x768 "
    "92:48x64 93:48x128 94:48x192 95:48x256 96:48x320 97:48x384 98:48x448 99:48x512 100:48x576 "
    "101:48x640 102:48x704 103:48x768 104:56x64 105:56x128 106:56x192 107:56x256 108:56x320 "
    "109:56x384 110:56x448 111:56x512 112:56x576 113:56x640 114:56x704 115:56x768 116:64x192 "
    "117:64x320 118:64x384 119:64x448 120:64x576 121:64x640 122:64x704 123:64x768 124:72x64 "
    "125:72x128 126:72x192 127:72x256 128:72x320 129:72x384 130:72x448 131:72x512 132:72x576 "
    "133:72x640 134:80x64 135:80x128 136:80x192 137:80x256 138:80x320 139:80x384 140:80x448 "
    "141:80x512 142:80x576 143:88x64 144:88x128 145:88x192 146:88x256 147:88x320 148:88x384 "
    "149:88x448 150:88x512 151:96x192 152:96x256 153:96x320 154:96x384 155:96x448 156:96x512 "
    "157:104x64 158:104x128 159:104x192 160:104x256 161:104x320 162:104x384 163:104x448 "
    "164:112x64 165:112x128 166:112x192 167:112x256 168:112x320 169:112x384 170:120x64 "
    "171:120x128 172:120x192 173:120x256 174:120x320 175:120x384 176:128x320 177:128x384 "
    "178:136x64 179:136x128 180:136x192 181:136x256 182:136x320 183:144x64 184:144x128 "
    "185:144x192 186:144x256 187:144x320 188:152x64 189:152x128 190:152x192 191:152x256 "
    "192:152x320 193:160x64 194:160x192 195:160x256 196:168x64 197:168x128 198:168x192 "
    "199:168x256 200:176x64 201:176x128 202:176x192 203:176x256 204:184x64 205:184x128 "
    "206:184x192 207:184x256 208:192x64 209:192x192 210:192x256 211:200x64 212:200x128 "
    "213:200x192 214:208x64 215:208x128 216:208x192 217:216x64 218:216x128 219:216x192 "
    "220:224x64 221:224x128 222:224x192 223:232x64 224:232x128 225:232x192 226:240x64 "
    "227:240x128 228:240x192 229:248x64 230:248x128 231:248x192 232:256x192 233:264x64 "
    "234:264x128 235:272x64 236:272x128 237:280x64 238:280x128 239:288x64 240:288x128 "
    "241:296x64 242:296x128 243:304x64 244:304x128 245:312x64 246:312x128 247:320x64 "
    "248:320x128 249:328x64 250:328x128 251:336x64 252:336x128 253:344x64 254:344x128 "
    "255:352x64 256:352x128 257:360x64 258:360x128 259:368x64 260:368x128 261:376x64 "
    "262:376x128 263:384x64 264:384x128 265:392x64 266:400x64 267:408x64 268:416x64 269:424x64 "
    "270:432x64 271:440x64 272:448x64 273:456x64 274:464x64 275:472x64 276:480x64 277:488x64 "
    "278:496x64 279:504x64 280:520x64 281:528x64 282:536x64 283:544x64 284:552x64 285:560x64 "
    "286:568x64 287:576x64 288:584x64 289:592x64 290:600x64 291:608x64 292:616x64 293:624x64 "
    "294:632x64 295:640x64 296:648x64 297:656x64 298:664x64 299:672x64 300:680x64 301:688x64 "
    "302:696x64 303:704x64 304:712x64 305:720x64 306:728x64 307:736x64 308:744x64 309:752x64 "
    "310:760x64 311:768x64 312:64x16 313:64x24 314:64x40 315:64x48 316:64x56 317:64x72 "
    "318:64x80 319:64x88 320:64x104 321:64x112 322:64x120 323:64x136 324:64x144 325:64x152 "
    "326:64x160 327:64x168 328:64x176 329:64x184 330:64x200 331:64x208 332:64x216 333:64x224 "
    "334:64x232 335:64x240 336:64x248 337:64x264 338:64x272 339:64x280 340:64x288 341:64x296 "
    "342:64x304 343:64x312 344:64x328 345:64x336 346:64x344 347:64x352 348:64x360 349:64x368 "
    "350:64x376 351:64x392 352:64x400 353:64x408 354:64x416 355:64x424 356:64x432 357:64x440 "
    "358:64x456 359:64x464 360:64x472 361:64x480 362:64x488 363:64x496 364:64x504 365:64x520 "
    "366:64x528 367:64x536 368:64x544 369:64x552 370:64x560 371:64x568 372:64x584 373:64x592 "
    "374:64x600 375:64x608 376:64x616 377:64x624 378:64x632 379:64x648 380:64x656 381:64x664 "
    "382:64x672 383:64x680 384:64x688 385:64x696 386:64x712 387:64x720 388:64x728 389:64x736 "
    "390:64x744 391:64x752 392:64x760 393:128x8 394:128x16 395:128x24 396:128x40 397:128x48 "
    "398:128x56 399:128x72 400:128x80 401:128x88 402:128x104 403:128x112 404:128x120 "
    "405:128x136 406:128x144 407:128x152 408:128x168 409:128x176 410:128x184 411:128x200 "
    "412:128x208 413:128x216 414:128x224 415:128x232 416:128x240 417:128x248 418:128x264 "
    "419:128x272 420:128x280 421:128x288 422:128x296 423:128x304 424:128x312 425:128x328 "
    "426:128x336 427:128x344 428:128x352 429:128x360 430:128x368 431:128x376 432:128x392 "
    "433:128x400 434:128x408 435:128x416 436:128x424 437:128x432 438:128x440 439:128x448 "
    "440:128x456 441:128x464 442:128x472 443:128x480 444:128x488 445:128x496 446:128x504 "
    "447:128x512 448:192x8 449:192x16 450:192x24 451:192x32 452:192x40 453:192x48 454:192x56 "
    "455:192x72 456:192x80 457:192x88 458:192x96 459:192x104 460:192x112 461:192x120 "
    "462:192x136 463:192x144 464:192x152 465:192x160 466:192x168 467:192x176 468:192x184 "
    "469:192x200 470:192x208 471:192x216 472:192x224 473:192x232 474:192x240 475:192x248 "
    "476:192x264 477:192x272 478:192x280 479:192x288 480:192x296 481:192x304 482:192x312 "
    "483:192x320 484:192x328 485:192x336 486:256x8 487:256x16 488:256x24 489:256x40 490:256x48 "
    "491:256x56 492:256x72 493:256x80 494:256x88 495:256x96 496:256x104 497:256x112 498:256x120 "
    "499:256x136 500:256x144 501:256x152 502:256x160 503:256x168 504:256x176 505:256x184 "
    "506:256x200 507:256x208 508:256x216 509:256x224 510:256x232 511:256x240 512:256x248 "
    "513:256x256 514:320x8 515:320x16 516:320x24 517:320x32 518:320x40 519:320x48 520:320x56 "
    "521:320x72 522:320x80 523:320x88 524:320x96 525:320x104 526:320x112 527:320x120 "
    "528:320x136 529:320x144 530:320x152 531:320x160 532:320x168 533:320x176 534:320x184 "
    "535:320x192 536:320x200 537:384x8 538:384x16 539:384x24 540:384x32 541:384x40 542:384x48 "
    "543:384x56 544:384x72 545:384x80 546:384x88 547:384x96 548:384x104 549:384x112 550:384x120 "
    "551:384x136 552:384x144 553:384x152 554:384x160 555:384x168 556:448x8 557:448x16 "
    "558:448x24 559:448x32 560:448x40 561:448x48 562:448x56 563:448x72 564:448x80 565:448x88 "
    "566:448x96 567:448x104 568:448x112 569:448x120 570:448x128 571:448x136 572:448x144 "
    "573:512x8 574:512x16 575:512x24 576:512x32 577:512x40 578:512x48 579:512x56 580:512x72 "
    "581:512x80 582:512x88 583:512x96 584:512x104 585:512x112 586:512x120 587:512x128 588:576x8 "
    "589:576x16 590:576x24 591:576x32 592:576x40 593:576x48 594:576x56 595:576x72 596:576x80 "
    "597:576x88 598:576x96 599:576x104 600:576x112 601:640x8 602:640x16 603:640x24 604:640x32 "
    "605:640x40 606:640x48 607:640x56 608:640x72 609:640x80 610:640x88 611:640x96 612:704x8 "
    "613:704x16 614:704x24 615:704x32 616:704x40 617:704x48 618:704x56 619:704x72 620:704x80 "
    "621:704x88 622:768x8 623:768x16 624:768x24 625:768x32 626:768x40 627:768x48 628:768x56 "
    "629:768x72 630:768x80 631:256x512 632:256x1024 633:512x512 634:512x1024 "
)
_STAGES = _names(
    "0:UNDEFINED 1:16x1 2:16x2 3:16x3 4:16x4 5:16x5 6:16x6 7:32x1 8:32x2 9:32x3 10:32x4 11:32x5 "
    "12:32x6 13:64x1 14:64x2 15:64x3 16:64x4 17:64x5 18:64x6 19:128x1 20:128x2 21:128x3 "
    "22:128x4 23:128x5 24:128x6 25:32x10 26:8x4 27:16x10 28:8x5 31:8x3 32:8xAUTO 33:16xAUTO "
    "34:32xAUTO 35:64xAUTO 36:128xAUTO 37:256xAUTO 38:768xAUTO "
)
_CLUSTERS = _names(
    "0:AUTO 2:1x1x1 3:2x1x1 4:4x1x1 5:1x2x1 6:2x2x1 7:4x2x1 8:1x4x1 9:2x4x1 10:4x4x1 11:8x1x1 "
    "12:1x8x1 13:8x2x1 14:2x8x1 15:16x1x1 16:1x16x1 17:3x1x1 18:5x1x1 19:6x1x1 20:7x1x1 "
    "21:9x1x1 22:10x1x1 23:11x1x1 24:12x1x1 25:13x1x1 26:14x1x1 27:15x1x1 28:3x2x1 29:5x2x1 "
    "30:6x2x1 31:7x2x1 32:1x3x1 33:2x3x1 34:3x3x1 35:4x3x1 36:5x3x1 37:3x4x1 38:1x5x1 39:2x5x1 "
    "40:3x5x1 41:1x6x1 42:2x6x1 43:1x7x1 44:2x7x1 45:1x9x1 46:1x10x1 47:1x11x1 48:1x12x1 "
    "49:1x13x1 50:1x14x1 51:1x15x1 "
)
_REDUCTIONS = _names(
    "0:NONE 1:INPLACE 2:COMPUTE_TYPE 4:OUTPUT_TYPE "
)
_INNER_SHAPES = _names(
    "0:UNDEFINED 1:MMA884 2:MMA1684 3:MMA1688 4:MMA16816 "
)

# cublasLt.h / cublas_api.h / library_types.h values (CUDA 13).
_CUDA_R_32F, _CUDA_R_16F, _CUDA_R_16BF, _CUDA_R_8F_E4M3, _CUDA_R_8F_E5M2 = 0, 2, 14, 28, 29
_CUBLAS_COMPUTE_32F = 68
_CUBLAS_OP_N, _CUBLAS_OP_T = 0, 1
_DESC_TRANSA, _DESC_TRANSB, _DESC_EPILOGUE, _DESC_BIAS_POINTER = 3, 4, 7, 8
_DESC_A_SCALE_POINTER, _DESC_B_SCALE_POINTER, _DESC_D_SCALE_POINTER = 17, 18, 20
_DESC_FAST_ACCUM, _DESC_BIAS_DATA_TYPE, _DESC_A_SCALE_MODE, _DESC_B_SCALE_MODE = 25, 26, 31, 32
_EPILOGUE_BIAS = 4
_PREF_MAX_WORKSPACE_BYTES = 1
_SCALE_SCALAR_32F, _SCALE_OUTER_VEC_32F, _SCALE_VEC128_32F, _SCALE_BLK128x128_32F = 0, 3, 4, 5
# CUBLASLT_ALGO_CONFIG_*: (id, size in bytes)
_CFG = {"algo_id": (0, 4), "tile_id": (1, 4), "split_k": (2, 4), "reduction_id": (3, 4),
        "swizzle": (4, 4), "custom": (5, 4), "stages_id": (6, 4), "inner_shape_id": (7, 2),
        "cluster_id": (8, 2)}

# Scale modes of torch._scaled_mm as (scale mode of our a, of our b); cuBLASLt's A is our b.
SCALE_MODES = {
    "tensor": (_SCALE_SCALAR_32F, _SCALE_SCALAR_32F),
    "row": (_SCALE_OUTER_VEC_32F, _SCALE_OUTER_VEC_32F),
    "block": (_SCALE_VEC128_32F, _SCALE_BLK128x128_32F),  # DeepSeek: a 1x128, b 128x128
    "block_1x128": (_SCALE_VEC128_32F, _SCALE_VEC128_32F),
    "block_128x128_1x128": (_SCALE_BLK128x128_32F, _SCALE_VEC128_32F),
}
_TYPES = {"f32": _CUDA_R_32F, "float32": _CUDA_R_32F, "bf16": _CUDA_R_16BF,
          "bfloat16": _CUDA_R_16BF, "f16": _CUDA_R_16F, "float16": _CUDA_R_16F,
          "e4m3": _CUDA_R_8F_E4M3, "float8_e4m3fn": _CUDA_R_8F_E4M3,
          "e5m2": _CUDA_R_8F_E5M2, "float8_e5m2": _CUDA_R_8F_E5M2}
_TYPE_NAMES = {_CUDA_R_32F: "f32", _CUDA_R_16BF: "bf16", _CUDA_R_16F: "f16",
               _CUDA_R_8F_E4M3: "e4m3", _CUDA_R_8F_E5M2: "e5m2"}


class _Algo(ctypes.Structure):
    _fields_ = [("data", ctypes.c_uint64 * 8)]


class _Heuristic(ctypes.Structure):
    _fields_ = [("algo", _Algo), ("workspaceSize", ctypes.c_size_t), ("state", ctypes.c_int),
                ("wavesCount", ctypes.c_float), ("reserved", ctypes.c_int * 4)]


_lock = threading.Lock()
_state: dict = {}


def _type_of(dtype: Any, what: str) -> int:
    name = str(dtype).replace("torch.", "")
    if name not in _TYPES:
        raise ValueError(f"cublaslt_plan: {what} {dtype!r}: expected one of f32, bf16, f16, e4m3, e5m2")
    return _TYPES[name]


def _loaded_cublaslt() -> Optional[str]:
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split(None, 5)[-1].strip() if line.count(" ") >= 5 else ""
                if os.path.basename(path).startswith("libcublasLt.so"):
                    return path
    except OSError:
        pass
    return None


def _lib():
    """(ctypes library, torch) for the libcublasLt torch has loaded; raises PlanUnavailable."""
    if "lib" in _state:
        return _state["lib"], _state["torch"]
    try:
        import torch
    except ImportError as e:
        raise PlanUnavailable(f"cublaslt_plan: no torch ({e})") from None
    if not torch.cuda.is_available() or torch.version.cuda is None:
        raise PlanUnavailable("cublaslt_plan: no CUDA GPU visible to torch; cuBLASLt's choice "
                              "can only be asked on the GPU itself")
    path = _loaded_cublaslt()
    if path is None:
        torch.cuda.current_blas_handle()  # loads libcublas and with it libcublasLt
        path = _loaded_cublaslt()
    if path is None:
        raise PlanUnavailable("cublaslt_plan: torch has not loaded libcublasLt (not in /proc/self/maps)")
    lib = ctypes.CDLL(path)  # the library already loaded: dlopen returns the same one
    P, S, I, U64, I64 = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_uint64, ctypes.c_int64
    pp = ctypes.POINTER(ctypes.c_void_p)
    sig = {
        "cublasLtCreate": [pp], "cublasLtGetVersion": [],
        "cublasLtMatmulDescCreate": [pp, I, I], "cublasLtMatmulDescDestroy": [P],
        "cublasLtMatmulDescSetAttribute": [P, I, P, S],
        "cublasLtMatrixLayoutCreate": [pp, I, U64, U64, I64], "cublasLtMatrixLayoutDestroy": [P],
        "cublasLtMatmulPreferenceCreate": [pp], "cublasLtMatmulPreferenceDestroy": [P],
        "cublasLtMatmulPreferenceSetAttribute": [P, I, P, S],
        "cublasLtMatmulAlgoGetHeuristic": [P, P, P, P, P, P, P, I, ctypes.POINTER(_Heuristic),
                                           ctypes.POINTER(I)],
        "cublasLtMatmulAlgoConfigGetAttribute": [ctypes.POINTER(_Algo), I, P, S, ctypes.POINTER(S)],
    }
    for name, args in sig.items():
        fn = getattr(lib, name)
        fn.argtypes = args
        fn.restype = S if name == "cublasLtGetVersion" else I
    _state.update(lib=lib, torch=torch, path=path, handles={}, dummies={})
    return lib, torch


def _check(status: int, what: str) -> None:
    if status != 0:
        raise PlanUnavailable(f"cublaslt_plan: {what} returned cuBLAS status {status}")


def _device(torch, device) -> int:
    if device is None:
        return torch.cuda.current_device()
    d = torch.device(device)
    if d.type != "cuda":
        raise PlanUnavailable(f"cublaslt_plan: device {device}: cuBLASLt's choice needs a CUDA device")
    return torch.cuda.current_device() if d.index is None else d.index


def _handle_and_dummy(lib, torch, dev: int):
    """A cuBLASLt handle made on device `dev` and a small device buffer whose address stands
    for the scale and bias pointers (the heuristic does not read them)."""
    if dev not in _state["handles"]:
        with torch.cuda.device(dev):
            h = ctypes.c_void_p()
            _check(lib.cublasLtCreate(ctypes.byref(h)), "cublasLtCreate")
            buf = torch.empty(4096, dtype=torch.uint8, device=f"cuda:{dev}")
        _state["handles"][dev] = h
        _state["dummies"][dev] = buf
    return _state["handles"][dev], _state["dummies"][dev].data_ptr()


def torch_workspace_bytes() -> int:
    """The cuBLASLt workspace torch (2.11, CUDA) passes: CUBLASLT_WORKSPACE_SIZE KiB, else 1 MiB
    (torch's unified cuBLAS/cuBLASLt workspace, which would be larger, needs
    TORCH_CUBLAS_WORKSPACE_CACHE=1 on CUDA: see CublasHandlePool.cpp)."""
    val = os.environ.get("CUBLASLT_WORKSPACE_SIZE")
    if val:
        try:
            return int(val) * 1024
        except ValueError:
            pass
    return 1024 * 1024


def _set(lib_fn, desc, attr: int, value: ctypes._SimpleCData, what: str) -> None:
    _check(lib_fn(desc, attr, ctypes.byref(value), ctypes.sizeof(value)), what)


def _name(table: dict, i: int) -> str:
    return table.get(i, str(i))


def query(m: int, n: int, k: int, out_dtype: Any = "bf16", use_fast_accum: bool = False,
          scale_mode: str = "tensor", bias_dtype: Any = None, a_dtype: Any = "e4m3",
          b_dtype: Any = "e4m3", scale_result: Optional[bool] = None,
          workspace: Optional[int] = None, device: Any = None) -> dict:
    """cuBLASLt's algorithm for ``torch._scaled_mm`` of a (m x k, row-major) by b (k x n,
    column-major) on this GPU, as a dict: ``algo_id``, ``tile``, ``stages``, ``split_k``,
    ``reduction``, ``custom``, ``cluster``, ``swizzle``, ``inner_shape`` (names as cublasLt.h
    spells them without prefix, e.g. tile '128x16', stages '128xAUTO', cluster '4x1x1',
    reduction 'COMPUTE_TYPE'; ids under ``*_id``), ``workspace_size`` (what the algorithm needs),
    ``workspace_limit`` (what torch allows), ``waves`` and the call: m, n, k (ours), out,
    fast, scale, bias. ``scale_mode``: a key of SCALE_MODES ("tensor", "row", "block" = a 1x128
    and b 128x128 as DeepSeek, "block_1x128", "block_128x128_1x128"). ``out_dtype`` and
    ``bias_dtype``: torch dtypes or 'f32', 'bf16', 'f16', 'e4m3', 'e5m2'. FP8 outputs take
    scale_result (default: set). Raises PlanUnavailable (one line) where cuBLASLt cannot be
    asked or returns no algorithm, ValueError for arguments torch._scaled_mm would refuse."""
    m, n, k = int(m), int(n), int(k)
    if min(m, n, k) < 1:
        raise ValueError(f"cublaslt_plan: shape {m}x{n}x{k}: every dimension must be >= 1")
    if scale_mode not in SCALE_MODES:
        raise ValueError(f"cublaslt_plan: scale_mode {scale_mode!r}: expected one of {', '.join(SCALE_MODES)}")
    out_t = _type_of(out_dtype, "out_dtype")
    a_t, b_t = _type_of(a_dtype, "a_dtype"), _type_of(b_dtype, "b_dtype")
    fp8_out = out_t in (_CUDA_R_8F_E4M3, _CUDA_R_8F_E5M2)
    bias_t = None if bias_dtype is None else _type_of(bias_dtype, "bias_dtype")
    if scale_mode.startswith("block") and use_fast_accum:
        raise ValueError("cublaslt_plan: torch refuses fast accumulation with block scales "
                         "(\"scaled_gemm doesn't support fast accum with 128x128 blockwise scaling\")")
    c_t = bias_t if bias_t is not None else (_CUDA_R_16F if fp8_out else out_t)
    if scale_result is None:
        scale_result = fp8_out
    sa_mode, sb_mode = SCALE_MODES[scale_mode]
    lt_m, lt_n = n, m  # cuBLASLt's view: column-major, operands swapped
    ws = torch_workspace_bytes() if workspace is None else int(workspace)
    with _lock:
        lib, torch = _lib()
        dev = _device(torch, device)
        handle, ptr = _handle_and_dummy(lib, torch, dev)
        desc, la, lb, lc, ld, pref = (ctypes.c_void_p() for _ in range(6))
        try:
            _check(lib.cublasLtMatmulDescCreate(ctypes.byref(desc), _CUBLAS_COMPUTE_32F, _CUDA_R_32F),
                   "cublasLtMatmulDescCreate")
            sd = lib.cublasLtMatmulDescSetAttribute
            _set(sd, desc, _DESC_TRANSA, ctypes.c_int32(_CUBLAS_OP_T), "TRANSA")
            _set(sd, desc, _DESC_TRANSB, ctypes.c_int32(_CUBLAS_OP_N), "TRANSB")
            _set(sd, desc, _DESC_A_SCALE_POINTER, ctypes.c_void_p(ptr), "A_SCALE_POINTER")
            _set(sd, desc, _DESC_B_SCALE_POINTER, ctypes.c_void_p(ptr + 512), "B_SCALE_POINTER")
            if scale_result:
                _set(sd, desc, _DESC_D_SCALE_POINTER, ctypes.c_void_p(ptr + 1024), "D_SCALE_POINTER")
            _set(sd, desc, _DESC_FAST_ACCUM, ctypes.c_int8(1 if use_fast_accum else 0), "FAST_ACCUM")
            if bias_t is not None:
                _set(sd, desc, _DESC_BIAS_POINTER, ctypes.c_void_p(ptr + 2048), "BIAS_POINTER")
                _set(sd, desc, _DESC_EPILOGUE, ctypes.c_uint32(_EPILOGUE_BIAS), "EPILOGUE")
                _set(sd, desc, _DESC_BIAS_DATA_TYPE, ctypes.c_int32(bias_t), "BIAS_DATA_TYPE")
            # cuBLASLt's A scale is our b's, its B scale our a's.
            _set(sd, desc, _DESC_A_SCALE_MODE, ctypes.c_int32(sb_mode), "A_SCALE_MODE")
            _set(sd, desc, _DESC_B_SCALE_MODE, ctypes.c_int32(sa_mode), "B_SCALE_MODE")
            mk = lib.cublasLtMatrixLayoutCreate
            _check(mk(ctypes.byref(la), b_t, k, lt_m, k), "layout A")   # transa='t': k x m, ld k
            _check(mk(ctypes.byref(lb), a_t, k, lt_n, k), "layout B")   # transb='n': k x n, ld k
            _check(mk(ctypes.byref(lc), c_t, lt_m, lt_n, lt_m), "layout C")
            _check(mk(ctypes.byref(ld), out_t, lt_m, lt_n, lt_m), "layout D")
            _check(lib.cublasLtMatmulPreferenceCreate(ctypes.byref(pref)), "PreferenceCreate")
            _set(lib.cublasLtMatmulPreferenceSetAttribute, pref, _PREF_MAX_WORKSPACE_BYTES,
                 ctypes.c_uint64(ws), "MAX_WORKSPACE_BYTES")
            res = _Heuristic()
            got = ctypes.c_int(0)
            status = lib.cublasLtMatmulAlgoGetHeuristic(handle, desc, la, lb, lc, ld, pref, 1,
                                                         ctypes.byref(res), ctypes.byref(got))
            if status != 0 or got.value == 0:
                raise PlanUnavailable(
                    f"cublaslt_plan: cuBLASLt's heuristic returned no algorithm for {m}x{n}x{k} "
                    f"(out {_TYPE_NAMES[out_t]}, fast {int(bool(use_fast_accum))}, scales "
                    f"{scale_mode}; status {status}): torch._scaled_mm would fail there too")
            cfg = {}
            written = ctypes.c_size_t(0)
            for key, (attr, size) in _CFG.items():
                buf = ctypes.c_uint64(0)
                _check(lib.cublasLtMatmulAlgoConfigGetAttribute(ctypes.byref(res.algo), attr,
                                                                ctypes.byref(buf), size,
                                                                ctypes.byref(written)), key)
                v = buf.value & ((1 << (8 * size)) - 1)
                cfg[key] = v - (1 << 32) if size == 4 and v >= 1 << 31 else v
        finally:
            for obj, destroy in ((pref, lib.cublasLtMatmulPreferenceDestroy),
                                 (ld, lib.cublasLtMatrixLayoutDestroy),
                                 (lc, lib.cublasLtMatrixLayoutDestroy),
                                 (lb, lib.cublasLtMatrixLayoutDestroy),
                                 (la, lib.cublasLtMatrixLayoutDestroy),
                                 (desc, lib.cublasLtMatmulDescDestroy)):
                if obj.value:
                    destroy(obj)
    return {
        "algo_id": cfg["algo_id"], "tile": _name(_TILES, cfg["tile_id"]),
        "stages": _name(_STAGES, cfg["stages_id"]), "split_k": max(1, cfg["split_k"]),
        "reduction": _name(_REDUCTIONS, cfg["reduction_id"]), "custom": cfg["custom"],
        "cluster": _name(_CLUSTERS, cfg["cluster_id"]), "swizzle": cfg["swizzle"],
        "inner_shape": _name(_INNER_SHAPES, cfg["inner_shape_id"]),
        "tile_id": cfg["tile_id"], "stages_id": cfg["stages_id"],
        "reduction_id": cfg["reduction_id"], "cluster_id": cfg["cluster_id"],
        "inner_shape_id": cfg["inner_shape_id"],
        "workspace_size": int(res.workspaceSize), "workspace_limit": ws,
        "waves": round(float(res.wavesCount), 6),
        "m": m, "n": n, "k": k, "out": _TYPE_NAMES[out_t], "fast": bool(use_fast_accum),
        "scale": scale_mode, "bias": None if bias_t is None else _TYPE_NAMES[bias_t],
    }


def versions(device: Any = None) -> dict:
    """What the answers depend on: cuBLASLt's version (cublasLtGetVersion) and path, the GPU's
    name, compute capability and SM count, torch's version and CUDA, the driver's CUDA version."""
    with _lock:
        lib, torch = _lib()
        dev = _device(torch, device)
    props = torch.cuda.get_device_properties(dev)
    driver = None
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        v = ctypes.c_int(0)
        if cuda.cuDriverGetVersion(ctypes.byref(v)) == 0:
            driver = v.value
    except OSError:
        pass
    return {"cublaslt_version": int(lib.cublasLtGetVersion()), "cublaslt_path": _state["path"],
            "gpu": props.name, "sm": f"{props.major}.{props.minor}",
            "sm_count": props.multi_processor_count, "torch": torch.__version__,
            "torch_git": getattr(torch.version, "git_version", None),
            "torch_cuda": torch.version.cuda, "driver_cuda_version": driver,
            "workspace_limit": torch_workspace_bytes()}


# ---- cuBLASLt's own trace (CUBLASLT_LOG_LEVEL=5), to check query() against -----------------

_TRACE_KEYS = {"algoId": "algo_id", "tile": "tile", "stages": "stages", "numSplitsK": "split_k",
               "reductionScheme": "reduction", "customOption": "custom", "clusterShape": "cluster",
               "swizzle": "swizzle", "ctaSwizzling": "swizzle", "innerShape": "inner_shape"}
_PREFIXES = ("CUBLASLT_", "MATMUL_TILE_", "MATMUL_STAGES_", "REDUCTION_SCHEME_", "CLUSTER_SHAPE_",
             "MATMUL_INNER_SHAPE_", "INNER_SHAPE_", "TILE_", "STAGES_")


def trace_algo(line: str) -> dict:
    """The algorithm of one ``[Trace][cublasLtMatmul]`` log line, in query()'s keys and names
    ({} if the line names none)."""
    import re
    m = re.search(r"algo=\[([^\]]*)\]", line)
    if not m:
        return {}
    out = {}
    for kv in m.group(1).split():
        if "=" not in kv:
            continue
        key, val = kv.split("=", 1)
        val = val.strip(",")
        for p in _PREFIXES:
            if val.startswith(p):
                val = val[len(p):]
        name = _TRACE_KEYS.get(key, key)
        out[name] = int(val) if val.lstrip("-").isdigit() else val
    w = re.search(r"workSpaceSizeInBytes=(\d+)", line)
    if w:
        out["workspace_limit"] = int(w.group(1))
    return out


def same_choice(plan: dict, traced: dict) -> list:
    """The fields where query()'s plan and a traced algorithm differ ([] when they agree).
    cuBLASLt's trace leaves out fields at their defaults (numSplitsK 1, reduction scheme
    NONE, custom option 0); those are compared as the defaults."""
    traced = dict({"split_k": 1, "reduction": "NONE", "custom": 0}, **traced)
    diff = []
    for key, val in traced.items():
        if key in plan and plan[key] != val and str(plan[key]) != str(val):
            diff.append(f"{key}: query {plan[key]} trace {val}")
    return diff



# ---- recorded tables (cuda/capture/record_cublaslt_plans.py) -------------------------------------

class Table:
    """A recorded table (sim/data/cublaslt_plans_<gpu>.json and .bin, written by
    cuda/capture/record_cublaslt_plans.py): ``lookup(m, n, k, out, fast, scale)`` -> the plan dict
    (query()'s fields) at a grid point, None where cuBLASLt returned no algorithm; KeyError off
    the grid. (fp8sim.torch.explain decides through the library, which has these built in.)"""

    def __init__(self, doc: dict, blob: bytes):
        self.provenance = doc["provenance"]
        self.axes = {a: list(v) for a, v in doc["axes"].items()}
        self._pos = {a: {x: i for i, x in enumerate(v)} for a, v in self.axes.items()}
        self.fields = doc["fields"]
        self.configs = [dict(zip(self.fields, c)) for c in doc["configs"]]
        self.none = doc.get("none", 65535)
        self.variants = doc["variants"]
        self.rules = doc.get("rules", [])
        size = 2 * len(self.axes["m"]) * len(self.axes["n"]) * len(self.axes["k"])
        self._codes = {key: blob[i * size:(i + 1) * size] for i, key in enumerate(self.variants)}

    def code(self, m: int, n: int, k: int, out: str, fast: bool, scale: str) -> int:
        key = f"{out} {scale} fast{int(bool(fast))}"
        i, j, l = self._pos["m"][m], self._pos["n"][n], self._pos["k"][k]
        at = 2 * ((i * len(self.axes["n"]) + j) * len(self.axes["k"]) + l)
        return int.from_bytes(self._codes[key][at:at + 2], "little")

    def lookup(self, m: int, n: int, k: int, out: str = "bf16", fast: bool = False,
               scale: str = "tensor") -> Optional[dict]:
        c = self.code(m, n, k, out, fast, scale)
        return None if c == self.none else dict(self.configs[c])


def load_table(path: str) -> Table:
    """A table written by cuda/capture/record_cublaslt_plans.py: its .json, with the .bin beside it."""
    import array
    import json
    with open(path) as f:
        doc = json.load(f)
    runs = array.array("H")
    with open(path[:-len(".json")] + ".bin", "rb") as f:
        runs.frombytes(f.read())
    codes = array.array("H")
    for code, count in zip(runs[::2], runs[1::2]):
        codes.extend([code] * count)
    return Table(doc, codes.tobytes())
