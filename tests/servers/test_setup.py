"""What root makes for `make services` before a server starts (the suite runs as root): never through a link. A
SERVICES_HOME on a way another user can change is refused before anything is made; a link in the place of a file
or folder it writes, chowns or chmods is refused in one line, and what the link leads to is not changed."""
from __future__ import annotations

import os
import pwd
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

from servers.processes import ServerFailed
from servers.setup import Place, Users, prepare_files, write_client_env, write_secrets

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="what root does: the suite runs as root")


@pytest.fixture
def outside() -> Iterator[Path]:
    """A file of root's alone, in a folder of root's alone: what a planted link leads to."""
    folder = Path(tempfile.mkdtemp(prefix="ringflow-outside-"))
    (folder / "file").write_text("root's own\n")
    (folder / "file").chmod(0o644)
    yield folder
    for path in folder.iterdir():
        path.unlink()
    folder.rmdir()


def unchanged(outside: Path) -> bool:
    file = outside / "file"
    return (file.read_text(), file.stat().st_mode & 0o777, file.stat().st_uid, outside.stat().st_mode & 0o777,
            sorted(path.name for path in outside.iterdir())) == ("root's own\n", 0o644, 0, 0o700, ["file"])


@pytest.mark.parametrize("way", ["another user's folder", "a folder every user writes"])
def test_a_services_home_on_a_way_another_user_can_change_is_refused_before_anything_is_made(
        tmp_path: Path, way: str) -> None:
    top = Path(tempfile.mkdtemp(prefix="ringflow-way-", dir="/tmp"))
    try:
        if way == "another user's folder":
            os.chown(top, pwd.getpwnam("nobody").pw_uid, -1)
            top.chmod(0o755)
            problem = "belongs to nobody"
        else:
            top.chmod(0o777)  # no sticky bit: anyone renames what is in it
            problem = "is writable by other users"
        home = top / "services"
        with pytest.raises(ServerFailed, match=rf"^SERVICES_HOME {home}: {top} {problem}, who could put a link "):
            Place(home=home).make_folders()
        assert not home.exists()
    finally:
        for path in sorted(top.rglob("*"), reverse=True):
            path.rmdir()
        top.rmdir()


def test_a_services_home_in_tmp_made_by_root_is_taken(tmp_path: Path) -> None:
    home = Path(tempfile.mkdtemp(prefix="ringflow-home-", dir="/tmp")) / "services"
    try:
        Place(home=home).make_folders()
        assert sorted(path.name for path in home.iterdir()) == ["logs", "run"]
        assert home.stat().st_mode & 0o777 == 0o711
    finally:
        for folder in (home / "logs", home / "run", home, home.parent):
            folder.rmdir()


def test_a_link_in_the_place_of_a_private_file_is_refused(tmp_path: Path, outside: Path) -> None:
    place = Place(home=tmp_path)
    write_secrets(place)
    secrets = write_secrets(place)
    (tmp_path / "client.env").symlink_to(outside / "file")
    with pytest.raises(ServerFailed, match=rf"^{tmp_path}/client.env is a link: refused"):
        write_client_env(place, secrets)
    assert unchanged(outside)


def test_a_link_in_the_place_of_a_servers_folder_is_refused(tmp_path: Path, outside: Path) -> None:
    place = Place(home=tmp_path)
    (tmp_path / "prefect").symlink_to(outside)
    with pytest.raises(ServerFailed, match=rf"^{tmp_path}/prefect is a link: refused"):
        prepare_files(place, Users("ringflow-services", "ringflow-services"))
    assert unchanged(outside)
