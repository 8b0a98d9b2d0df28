"""What proves that a registered model version is the pipeline's: the SavedModel's digest (sha256 over its files'
relative paths and contents, in sorted order) and an HMAC of it made with a key only the pipeline and the model
server hold, both recorded as tags of the version when the pipeline registers it (model_registry).

Trust: a tag of the registry can be written by anyone who can write the registry (MLflow's credentials,
$SERVICES_HOME/client.env), so the tags alone prove nothing against a registry writer; the HMAC does, as long as the
key stays with the accounts that run the pipeline and the model server. The key is a file of mode 0600 belonging
to the account that reads it: RINGFLOW_REGISTRY_KEY names it, else ~/.config/ringflow/registry.key
($XDG_CONFIG_HOME). The pipeline makes it at its first registration; a model server, or a worker, of another account
or host needs a copy of the same file (the server refuses every version signed with another key), and so do the
members of a team who register from their own checkouts. Whoever holds the key (the pipeline's accounts: its worker,
its flow runs, those members) can sign, and is trusted; a registry writer is not; the artifact store is not either
(a file changed after registration changes the digest). A key rather than a ledger of digests on the pipeline's
host: the pipeline runs on workers (and team members' machines), the server maybe on another host, and a key file
is copied once, where a ledger would have to follow every registration.
"""
from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
import stat
from pathlib import Path
from typing import Mapping

KEY_ENV = "RINGFLOW_REGISTRY_KEY"
DIGEST_TAG, SIGNATURE_TAG, KEY_ID_TAG = "ringflow.savedmodel_sha256", "ringflow.signature", "ringflow.signing_key"
SCORE_TAG = "ringflow.score."  # + a test split's hash + "." + a score's name: the version's signed score on it
KEY_BYTES = 32
CHUNK = 1 << 20


class Untrusted(RuntimeError):
    """A version, a SavedModel or a key that cannot be trusted; str() is one line naming it and why."""
    bad_input = True


def key_path() -> Path:
    """The key file: RINGFLOW_REGISTRY_KEY, else ~/.config/ringflow/registry.key."""
    named = os.environ.get(KEY_ENV)
    if named:
        return Path(named).expanduser()
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config) / "ringflow" / "registry.key"


def read_key(path: Path | None = None) -> bytes:
    """The key, read without following a link; Untrusted when missing, not a regular file of this account, or
    open to other accounts (one who can write it could sign)."""
    path = path or key_path()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        raise Untrusted(f"no registry key at {path}: the pipeline makes it when it registers a version; a server "
                        f"of another account or host needs a copy ({KEY_ENV} names it)") from None
    except OSError as error:
        raise Untrusted(f"cannot read the registry key {path} ({error.strerror}; a link is refused)") from None
    with os.fdopen(fd, "rb") as file:
        status = os.fstat(file.fileno())
        problem = key_problem(status)
        if problem:
            raise Untrusted(f"the registry key {path} {problem}: refused")
        key = file.read(4 * KEY_BYTES).strip()
    if len(key) < KEY_BYTES:
        raise Untrusted(f"the registry key {path} holds {len(key)} bytes, fewer than {KEY_BYTES}: refused")
    return key


def key_problem(status: os.stat_result) -> str | None:
    """Why a key file of this status cannot be trusted, or None."""
    if not stat.S_ISREG(status.st_mode):
        return "is not a regular file"
    if status.st_uid != os.geteuid():
        return f"belongs to uid {status.st_uid}, not to this account (uid {os.geteuid()})"
    if status.st_mode & 0o077:
        return f"has mode {stat.S_IMODE(status.st_mode):o}: other accounts may read or write it (chmod 600 it)"
    return None


def pipeline_key(path: Path | None = None) -> bytes:
    """The key, made (random, mode 0600, in a folder of mode 0700 when new) when there is none yet. Two pipelines
    making it at once: the file appears whole, once (a link to a finished temporary file), and both use it."""
    path = path or key_path()
    if not os.path.lexists(path):
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        temporary = f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}"
        try:
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=folder)
            with os.fdopen(fd, "w") as file:
                file.write(secrets.token_hex(KEY_BYTES) + "\n")
                file.flush()
                os.fsync(file.fileno())
            with contextlib.suppress(FileExistsError):  # another pipeline made it first: theirs is the key
                os.link(temporary, path.name, src_dir_fd=folder, dst_dir_fd=folder, follow_symlinks=False)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary, dir_fd=folder)
            os.close(folder)
    return read_key(path)


def key_id(key: bytes) -> str:
    """A short name of a key that says nothing of it (which key signed a version)."""
    return hashlib.sha256(b"ringflow registry key id\n" + key).hexdigest()[:16]


def savedmodel_digest(folder: Path) -> str:
    """sha256 over a SavedModel folder's files: each one's relative path and content, in sorted order of the paths.
    Untrusted when it holds a link or anything but files and folders (the pipeline writes neither)."""
    files = []
    for parent, folders, names in os.walk(folder):
        for name in folders + names:
            path = Path(parent) / name
            mode = os.lstat(path).st_mode
            if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
                raise Untrusted(f"{path} is not a plain file or folder (a link?): a SavedModel holds none")
            if stat.S_ISREG(mode):
                files.append(path.relative_to(folder).as_posix())
    digest = hashlib.sha256()
    for relative in sorted(files):
        digest.update(f"{len(relative.encode())}:{relative}\0".encode())
        digest.update(file_digest(folder / relative).encode())
    return digest.hexdigest()


def file_digest(path: Path) -> str:
    """sha256 of one file's content, read without following a link."""
    digest = hashlib.sha256()
    with os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW), "rb") as file:
        while chunk := file.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def signed_record(model_name: str, version: str, digest: str, class_names: list[str]) -> bytes:
    """What the signature covers: the version (a signature copied to another version does not hold), the
    SavedModel's digest and the class names the server answers with."""
    record = {"model": model_name, "version": str(version), "savedmodel_sha256": digest,
              "classes": [str(name) for name in class_names]}
    return b"ringflow registered version v1\n" + json.dumps(record, sort_keys=True, separators=(",", ":")).encode()


def signature(key: bytes, model_name: str, version: str, digest: str, class_names: list[str]) -> str:
    return hmac.new(key, signed_record(model_name, version, digest, class_names), hashlib.sha256).hexdigest()


def version_tags(key: bytes, model_name: str, version: str, digest: str, class_names: list[str]) -> dict[str, str]:
    """The tags the pipeline records on a version it registered."""
    return {DIGEST_TAG: digest, SIGNATURE_TAG: signature(key, model_name, version, digest, class_names),
            KEY_ID_TAG: key_id(key)}


def refuse_unsigned(model_name: str, version: str, tags: Mapping[str, str]) -> None:
    """Untrusted when the version carries no pipeline signature at all (checked before anything is downloaded)."""
    if not tags.get(DIGEST_TAG) or not tags.get(SIGNATURE_TAG):
        raise Untrusted(f"{model_name} v{version} was not registered by ringflow's pipeline (no signed SavedModel "
                        "digest among its tags): refused")


def verify(key: bytes, model_name: str, version: str, tags: Mapping[str, str], savedmodel: Path,
           class_names: list[str]) -> str:
    """The downloaded SavedModel's digest, when it is the one the pipeline signed for this version (and these class
    names) with `key`; Untrusted otherwise, saying whether its files changed or the signature does not hold."""
    refuse_unsigned(model_name, version, tags)
    digest = savedmodel_digest(savedmodel)
    recorded = tags[DIGEST_TAG]
    if not hmac.compare_digest(digest, recorded):
        raise Untrusted(f"{model_name} v{version}'s SavedModel is not the one registered (sha256 {digest[:16]}, "
                        f"recorded {recorded[:16]}): its files changed since: refused")
    expected = signature(key, model_name, version, digest, class_names)
    if not hmac.compare_digest(expected, tags[SIGNATURE_TAG]):
        signer = tags.get(KEY_ID_TAG, "?")
        raise Untrusted(f"{model_name} v{version}'s signature does not hold for this version with the registry key "
                        f"{key_path()} (id {key_id(key)}; signed with {signer}): written into the registry by other "
                        "means, or its class names changed: refused")
    return digest


def score_tag(test_split: str, score_name: str) -> str:
    """The tag that holds a version's score `score_name` (the gate's metric) on the test split `test_split`."""
    return f"{SCORE_TAG}{test_split}.{score_name}"


def score_mac(key: bytes, model_name: str, version: str, digest: str, test_split: str, score_name: str,
              value: str) -> str:
    """The HMAC of a score: of this version's SavedModel (its digest) on this split, so that it holds for no other."""
    record = {"model": model_name, "version": str(version), "savedmodel_sha256": digest, "test_split": test_split,
              "score": score_name, "value": value}
    message = b"ringflow version score v1\n" + json.dumps(record, sort_keys=True, separators=(",", ":")).encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def signed_score(key: bytes, model_name: str, version: str, digest: str, test_split: str, score_name: str,
                 value: float) -> dict[str, str]:
    """The tag recording a version's score on a test split, signed: the gate reads it instead of scoring the
    champion again (a TensorFlow process and a pass over the split)."""
    text = repr(float(value))
    mac = score_mac(key, model_name, version, digest, test_split, score_name, text)
    return {score_tag(test_split, score_name): f"{text} {mac}"}


def verified_score(key: bytes, model_name: str, version: str, tags: Mapping[str, str], test_split: str,
                   score_name: str) -> float | None:
    """The version's score on the split as the pipeline signed it; None when there is none or its signature does
    not hold for this version's signed SavedModel (then it is scored again)."""
    text, _, mac = tags.get(score_tag(test_split, score_name), "").partition(" ")
    digest = tags.get(DIGEST_TAG, "")
    if not (text and mac and digest):
        return None
    expected = score_mac(key, model_name, version, digest, test_split, score_name, text)
    if not hmac.compare_digest(expected, mac):
        return None
    try:
        return float(text)
    except ValueError:
        return None
