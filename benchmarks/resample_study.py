"""Which filter to downscale with: quality against a float reference, and speed.

    python benchmarks/resample_study.py [CORPUS_IMAGES]   (default 300; 0: the photos alone)

Images: the photographs in sample/photos (as JPEGs at quality 95, the logo left out: it is not
a photo) and the first CORPUS_IMAGES of the 2,000-image benchmark corpus (benchmarks/corpus.py),
each downscaled to a short side of 256, 128 and 64 px (only where that shrinks it).

Candidates: Pillow's filters, the libvips kernels the converter's fast path uses for three of
them (transforms/image/fastpath.py), and OpenCV's INTER_AREA. Each runs as the converter would: the
JPEG decoded at 1/2, 1/4 or 1/8 scale where the target allows (libjpeg's DCT scaling, the same
for every candidate), then the filter to the exact size. Each result is compared with two
references made from the image decoded at full size, in float64 and never rounded: a Lanczos-3
resampling and an exact area average (each
output pixel the mean of the input area it covers, fractional pixels weighted), both separable
and computed with numpy from their definitions. Two references, so that neither the area nor
the windowed-sinc candidates win by resembling their own reference. Quality: PSNR over the RGB
values (peak 255) and SSIM over luma (BT.601; Gaussian window 11, sigma 1.5, the usual
constants), means over every image and size. Speed: the filter alone (decoded pixels in, resized
pixels out, one thread), median of 3 rounds over the corpus images at 256 px. Writes
benchmarks/results/resample-study.json and prints the README's table.

OpenCV's INTER_LINEAR is measured as a witness of aliasing: it samples 2x2 neighbours whatever
the scale, so it never enters the converter. Photos hide aliasing (little of their detail is
finer than the output's pixels), so each filter also shrinks a fine grating (stripes 2.4 px
apart, 4x smaller): an antialiasing filter gives near-flat grey, aliasing gives moire; the
figure is the result's standard deviation (0 is ideal; the grating's own is 127).
"""

import io
import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np
import simplejpeg
from corpus import PHOTOS, make_corpus
from PIL import Image

from tfrecord_pipeline.transforms.image.fastpath import resample

HERE = Path(__file__).resolve().parent
SHORT_SIDES = (256, 128, 64)
PILLOW = Image.Resampling


def _pillow(name):
    filter_ = PILLOW[name]
    return lambda pixels, size: np.asarray(Image.fromarray(pixels).resize(size, filter_))


def _vips(kernel):
    return lambda pixels, size: resample(pixels, size, kernel)


def _opencv(flag):
    return lambda pixels, size: cv2.resize(pixels, size, interpolation=flag)


# name → (what it is, resize(pixels, (width, height)))
CANDIDATES = {
    "bicubic": ("Pillow BICUBIC (antialiased: support widened by the scale)", _pillow("BICUBIC")),
    "bilinear": ("Pillow BILINEAR (antialiased triangle)", _pillow("BILINEAR")),
    "bicubic, libvips": ("libvips reduce, cubic: the fast path's bicubic", _vips("cubic")),
    "bilinear, libvips": ("libvips reduce, linear: the fast path's bilinear", _vips("linear")),
    "lanczos, libvips": ("libvips reduce, lanczos3: the fast path's lanczos", _vips("lanczos3")),
    "area": ("OpenCV INTER_AREA (exact area average)", _opencv(cv2.INTER_AREA)),
    "box": ("Pillow BOX (area average)", _pillow("BOX")),
    "hamming": ("Pillow HAMMING", _pillow("HAMMING")),
    "lanczos": ("Pillow LANCZOS (Lanczos-3, antialiased)", _pillow("LANCZOS")),
    "opencv linear (aliases)": ("OpenCV INTER_LINEAR, 2x2 taps at any scale", _opencv(1)),
}


def _lanczos3(x: np.ndarray) -> np.ndarray:
    return np.where(np.abs(x) < 3, np.sinc(x) * np.sinc(x / 3), 0.0)


def lanczos_weights(size_in: int, size_out: int) -> np.ndarray:
    """(out, in) matrix: Lanczos-3 widened by the downscale factor, each row summing to 1."""
    scale = size_in / size_out
    centres = (np.arange(size_out) + 0.5) * scale - 0.5
    weights = _lanczos3((np.arange(size_in)[None, :] - centres[:, None]) / scale)
    return weights / weights.sum(axis=1, keepdims=True)


def area_weights(size_in: int, size_out: int) -> np.ndarray:
    """(out, in) matrix: the share of each input pixel inside each output pixel's footprint."""
    edges = np.arange(size_out + 1) * (size_in / size_out)
    left, right = edges[:-1, None], edges[1:, None]
    pixels = np.arange(size_in)[None, :]
    overlap = np.clip(np.minimum(right, pixels + 1) - np.maximum(left, pixels), 0, None)
    return overlap / overlap.sum(axis=1, keepdims=True)


def reference(pixels: np.ndarray, size: tuple[int, int], weights) -> np.ndarray:
    rows, columns = weights(pixels.shape[0], size[1]), weights(pixels.shape[1], size[0])
    planes = pixels.astype(np.float64).transpose(2, 0, 1)  # channel, row, column
    return (rows @ planes @ columns.T).transpose(1, 2, 0)


def psnr(result: np.ndarray, truth: np.ndarray) -> float:
    error = np.mean((result.astype(np.float64) - truth) ** 2)
    return 10 * math.log10(255**2 / max(error, 1e-12))


def _blur(plane: np.ndarray) -> np.ndarray:
    taps = np.exp(-0.5 * (np.arange(-5, 6) / 1.5) ** 2)
    taps /= taps.sum()
    for axis in (0, 1):
        plane = np.apply_along_axis(np.convolve, axis, plane, taps, mode="valid")
    return plane


def ssim(result: np.ndarray, truth: np.ndarray) -> float:
    luma = np.array([0.299, 0.587, 0.114])
    x, y = result.astype(np.float64) @ luma, truth @ luma
    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
    mx, my = _blur(x), _blur(y)
    vx, vy, cov = _blur(x * x) - mx * mx, _blur(y * y) - my * my, _blur(x * y) - mx * my
    index = ((2 * mx * my + c1) * (2 * cov + c2)) / ((mx**2 + my**2 + c1) * (vx + vy + c2))
    return float(index.mean())


def moire(resize) -> float:
    """Standard deviation of a 1024x1024 grating of period 2.4 px shrunk to 256x256."""
    stripes = 127.5 + 127.5 * np.cos(2 * np.pi * np.arange(1024) / 2.4)
    grating = np.repeat(np.round(stripes).astype(np.uint8)[None, :, None], 1024, 0)
    return round(float(resize(np.repeat(grating, 3, 2), (256, 256)).std()), 2)


def decode_for(data: bytes, size: tuple[int, int]) -> np.ndarray:
    """Decoded at the smallest of 1, 1/2, 1/4, 1/8 that still covers `size` (as Pillow's draft)."""
    height, width, _, _ = simplejpeg.decode_jpeg_header(data)
    step = 1
    while step < 8 and width // (2 * step) >= size[0] and height // (2 * step) >= size[1]:
        step *= 2
    return simplejpeg.decode_jpeg(
        data, "RGB", min_height=-(-height // step), min_width=-(-width // step)
    )


def images(corpus_images: int) -> list[bytes]:
    found = []
    for path in sorted(PHOTOS.glob("*.*g")):
        if path.stem != "logo":
            buffer = io.BytesIO()
            Image.open(path).convert("RGB").save(buffer, "JPEG", quality=95)
            found.append(buffer.getvalue())
    if corpus_images:
        root = Path(os.environ.get("CORPUS_DIR", tempfile.gettempdir()))
        manifest = make_corpus(root / "tfrp-corpus-2000", 2000)
        paths = sorted((manifest.parent / "images").glob("*/*.jpg"))[:corpus_images]
        found += [path.read_bytes() for path in paths]
    return found


def quality(sources: list[bytes]) -> dict:
    metrics = ("psnr_lanczos", "psnr_area", "ssim_lanczos")
    scores = {name: {metric: [] for metric in metrics} for name in CANDIDATES}
    for data in sources:
        full = simplejpeg.decode_jpeg(data, "RGB")
        for short in SHORT_SIDES:
            scale = short / min(full.shape[:2])
            if scale >= 1:
                continue
            size = (max(1, round(full.shape[1] * scale)), max(1, round(full.shape[0] * scale)))
            truth = reference(full, size, lanczos_weights)
            area = reference(full, size, area_weights)
            decoded = decode_for(data, size)
            for name, (_, resize) in CANDIDATES.items():
                result = resize(decoded, size)
                scores[name]["psnr_lanczos"].append(psnr(result, truth))
                scores[name]["psnr_area"].append(psnr(result, area))
                scores[name]["ssim_lanczos"].append(ssim(result, truth))
    return {
        name: {metric: round(statistics.mean(values), 4) for metric, values in metrics.items()}
        for name, metrics in scores.items()
    }


def speed(sources: list[bytes], rounds: int = 3) -> dict:
    work = []
    for data in sources:
        height, width, _, _ = simplejpeg.decode_jpeg_header(data)
        scale = 256 / min(height, width)
        if scale < 1:
            size = (round(width * scale), round(height * scale))
            work.append((decode_for(data, size), size))
    timings = {name: [] for name in CANDIDATES}
    for _ in range(rounds):
        for name, (_, resize) in CANDIDATES.items():
            start = time.process_time()
            for pixels, size in work:
                resize(pixels, size)
            timings[name].append((time.process_time() - start) / len(work) * 1e6)
    return {name: [round(value, 1) for value in values] for name, values in timings.items()}


def main(corpus_images: int) -> dict:
    cv2.setNumThreads(1)
    sources = images(corpus_images)
    scores = quality(sources)
    timings = speed(sources[-corpus_images:] if corpus_images else sources)
    return {
        "images": len(sources),
        "short_sides": SHORT_SIDES,
        "candidates": {
            name: {
                "maps_to": CANDIDATES[name][0],
                **scores[name],
                "moire_std": moire(CANDIDATES[name][1]),
                "resize_us": statistics.median(timings[name]),
                "rounds_us": timings[name],
            }
            for name in CANDIDATES
        },
    }


def table(report: dict) -> str:
    lines = [
        "| filter | maps to | PSNR vs Lanczos-3 | PSNR vs area | SSIM vs Lanczos-3 | moire "
        "| resize, us |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for name, row in report["candidates"].items():
        lines.append(
            f"| {name} | {row['maps_to']} | {row['psnr_lanczos']:.2f} dB "
            f"| {row['psnr_area']:.2f} dB | {row['ssim_lanczos']:.4f} | {row['moire_std']:.1f} "
            f"| {row['resize_us']:,.0f} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    result = main(int(sys.argv[1]) if len(sys.argv) > 1 else 300)
    (HERE / "results" / "resample-study.json").write_text(json.dumps(result, indent=2) + "\n")
    print(table(result))
