#!/usr/bin/env python3
"""make_image_folder.py ROOT [--classes 10] [--per-class 200] [--seed 0]
                        [--quality 90] [--ann-file FILE] [--meta FILE] [--jobs N]

Writes an ImageNet-like folder of JPEGs, the same for the same arguments:

  ROOT/<class>/<n>.JPEG     class folders n00000000, n00000001, ... (sorted
                            = label order) and n = 0 .. per-class - 1:
                            MMPretrain's CustomDataset layout (and
                            torchvision's ImageFolder's)
  --ann-file FILE           MMPretrain's ImageNet annotation list, one
                            `<class>/<n>.JPEG <label>` a line (relative to ROOT)
  --meta FILE               classes.txt: the class names, one a line, in label order

The images are sized like ImageNet's: the long side 500 pixels for 70% of
them (else 300-800), the aspect 4:3 for most (also 3:2, 1:1, 3:4, 2:3), so
500x375 is the most common size; baseline JPEG, 4:2:0, --quality 90. Their
content is made so that decoding them costs what a photo's decoding costs,
not less: a smooth random colour gradient, random noise at three scales
(48, 12 and 3 pixels, upsampled: clouds and texture), a few filled shapes
(ellipses, rectangles, lines: sharp edges) and per-pixel noise over all of
it. The files average ~115 KB (ImageNet's training images: ~110 KB), and
libjpeg-turbo decodes a 500x375 one in ~1.5-2 ms on this machine's cores.

Image (class c, n) draws from its own generator, seeded (seed, c, n): an
image does not depend on --jobs or on which images were made before it.
Needs numpy and PIL (Debian's python3-numpy, python3-pil); ~8 ms of CPU an
image: 2000 images in ~10 s on 2 idle cores.
"""
import argparse
import multiprocessing
import os
import sys
import time

import numpy as np
from PIL import Image, ImageDraw

# (cell size in pixels, amplitude): the noise layers upsampled onto the image.
OCTAVES = ((48, 60), (12, 40), (3, 30))
FINE_NOISE = 36  # per-pixel noise, uniform in [-36, 36]
ASPECTS = (4 / 3, 3 / 2, 1.0, 3 / 4, 2 / 3)  # width / height
ASPECT_P = (0.55, 0.15, 0.10, 0.15, 0.05)


def class_name(c):
    return f"n{c:08d}"


def image_size(rng):
    """(width, height), ImageNet-like: mostly 500x375."""
    long_side = 500 if rng.random() < 0.7 else int(rng.integers(300, 801))
    aspect = ASPECTS[rng.choice(len(ASPECTS), p=ASPECT_P)]
    if aspect >= 1:
        return long_side, max(1, round(long_side / aspect))
    return max(1, round(long_side * aspect)), long_side


def make_image(rng, width, height):
    """An RGB PIL image: gradient + multi-scale noise + shapes + pixel noise."""
    h, w = height, width
    # The smooth part (gradient and noise layers) at a third of the size,
    # then upsampled once: one full-size resize instead of one per layer.
    sh, sw = max(2, h // 3), max(2, w // 3)
    ys = np.linspace(-0.5, 0.5, sh, dtype=np.float32)[:, None, None]
    xs = np.linspace(-0.5, 0.5, sw, dtype=np.float32)[None, :, None]
    small = rng.uniform(40, 215, 3).astype(np.float32) + \
        rng.uniform(-100, 100, 3).astype(np.float32) * xs + \
        rng.uniform(-100, 100, 3).astype(np.float32) * ys
    for cell, amp in OCTAVES:
        grid = rng.integers(128 - amp, 128 + amp + 1, (max(2, h // cell), max(2, w // cell), 3),
                            dtype=np.uint8)
        if grid.shape[:2] != (sh, sw):
            grid = np.asarray(Image.fromarray(grid).resize((sw, sh), Image.BILINEAR))
        small += grid.astype(np.float32) - 128
    pil = Image.fromarray(np.clip(small, 0, 255).astype(np.uint8)).resize((w, h), Image.BILINEAR)
    draw = ImageDraw.Draw(pil)
    for _ in range(int(rng.integers(3, 9))):
        x0, x1 = sorted(int(v) for v in rng.integers(0, w, 2))
        y0, y1 = sorted(int(v) for v in rng.integers(0, h, 2))
        colour = tuple(int(v) for v in rng.integers(0, 256, 3))
        kind = int(rng.integers(3))
        if kind == 0:
            draw.ellipse([x0, y0, x1, y1], fill=colour)
        elif kind == 1:
            draw.rectangle([x0, y0, x1, y1], fill=colour)
        else:
            draw.line([x0, y0, x1, y1], fill=colour, width=int(rng.integers(2, 12)))
    pixels = np.asarray(pil, dtype=np.int16)
    pixels += rng.integers(-FINE_NOISE, FINE_NOISE + 1, pixels.shape, dtype=np.int16)
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))


def write_one(task):
    root, seed, quality, c, n = task
    rng = np.random.default_rng([seed, c, n])
    width, height = image_size(rng)
    path = os.path.join(root, class_name(c), f"{n}.JPEG")
    tmp = path + ".tmp"
    make_image(rng, width, height).save(tmp, "JPEG", quality=quality)
    os.replace(tmp, path)  # a run stopped half-way leaves no truncated JPEG
    return os.path.getsize(path), width * height


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("root", help="the folder to write (created; existing files are overwritten)")
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--per-class", type=int, default=200, help="images per class")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quality", type=int, default=90, help="JPEG quality (default 90)")
    p.add_argument("--ann-file", help="write MMPretrain's annotation list here")
    p.add_argument("--meta", help="write classes.txt (class names, one a line) here")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                   help="processes (default: the CPUs); does not change the images")
    a = p.parse_args()
    if a.classes < 1 or a.per_class < 1 or a.jobs < 1 or a.seed < 0 or not 1 <= a.quality <= 100:
        p.error("--classes, --per-class and --jobs must be >= 1, --seed >= 0, --quality 1-100")

    start = time.monotonic()
    for c in range(a.classes):
        os.makedirs(os.path.join(a.root, class_name(c)), exist_ok=True)
    tasks = [(a.root, a.seed, a.quality, c, n) for c in range(a.classes) for n in range(a.per_class)]
    if a.jobs == 1:
        results = [write_one(t) for t in tasks]
    else:
        with multiprocessing.Pool(a.jobs) as pool:
            results = pool.map(write_one, tasks, chunksize=16)
    if a.ann_file:
        with open(a.ann_file, "w") as f:
            f.writelines(f"{class_name(c)}/{n}.JPEG {c}\n" for _, _, _, c, n in tasks)
    if a.meta:
        with open(a.meta, "w") as f:
            f.writelines(class_name(c) + "\n" for c in range(a.classes))
    total = sum(r[0] for r in results)
    pixels = sum(r[1] for r in results)
    print(f"{a.root}: {len(tasks)} JPEGs in {a.classes} classes, {total / 2**20:.1f} MiB, "
          f"mean {total / len(tasks) / 1024:.0f} KB and {pixels / len(tasks) / 1e3:.0f} kpixels "
          f"per file ({time.monotonic() - start:.1f} s)")


if __name__ == "__main__":
    sys.exit(main())
