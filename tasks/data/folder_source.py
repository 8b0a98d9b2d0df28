"""`folder:<path>`: an image folder with one sub-folder per class (JPEG, PNG), as in ImageNet's layout.

Either `<path>/<class>/*` (splits carved later) or `<path>/{train,validation|val,test}/<class>/*`.
Sorted class names become label ids. Files are kept as they are: JPEG bytes are never re-encoded.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from tasks.data.source_data import IMAGE_SUFFIXES, SPLIT_ALIASES, SourceData, SourceError, SplitData
from tasks.paths import resolve_path


def _class_dirs(root: Path) -> list[Path]:
    return sorted((p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")), key=lambda p: p.name)


def _split_roots(root: Path) -> dict[str, Path]:
    """{'train': root} for a plain class folder, or the split sub-folders when they exist."""
    found = {SPLIT_ALIASES[p.name]: p for p in _class_dirs(root) if p.name in SPLIT_ALIASES}
    return found if "train" in found else {"train": root}


def _images(class_dir: Path) -> list[Path]:
    return sorted(p for p in class_dir.rglob("*") if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)


def _listing_digest(files: list[str], root: Path) -> str:
    digest = hashlib.sha256()
    for name in files:
        stat = Path(name).stat()
        digest.update(f"{Path(name).relative_to(root)}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def load_folder(argument: str) -> SourceData:
    """List the images and their labels (files are read later, by the conversion workers)."""
    root = resolve_path(argument)
    if not root.is_dir():
        raise SourceError(f"image folder not found: {root}")
    split_roots = _split_roots(root)
    classes = [p.name for p in _class_dirs(split_roots["train"])]
    if not classes:
        raise SourceError(f"{root}: no class sub-folders (expected <path>/<class>/<image>.jpg|png)")
    splits, all_files = {}, []
    for split, split_root in split_roots.items():
        files, labels = [], []
        for class_dir in _class_dirs(split_root):
            if class_dir.name not in classes:
                raise SourceError(f"{class_dir}: class {class_dir.name!r} is not among train's classes")
            images = _images(class_dir)
            files += [str(p) for p in images]
            labels += [classes.index(class_dir.name)] * len(images)
        if not files:
            raise SourceError(f"{split_root}: no JPEG or PNG images")
        splits[split] = SplitData(np.asarray(labels, dtype=np.int64), files=files)
        all_files += files
    return SourceData(f"folder:{argument}", classes, splits, {"listing": _listing_digest(all_files, root)})
