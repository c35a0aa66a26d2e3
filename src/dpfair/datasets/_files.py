"""Finding, downloading and checking the raw data files shared by every loader.

A data file is looked up, in this order:

1. an explicit ``path`` (a file stands for the loader's primary file, the other files are looked up next to it;
   a folder is searched for every file);
2. the data home ``<home>/<folder>/<file>``, where the homes searched are the explicit ``data_home`` argument
   if given, else ``$DPFAIR_DATA`` (when set) and then ``~/.cache/dpfair``;
3. a gzip copy embedded in the package (``dpfair/datasets/embedded/<file>.gz``; only for adult and compas);
4. a download from the file's canonical URL into the first data home (``download=True``, short timeout).

A file may also be stored gzip-compressed as ``<file>.gz``.  Checksums always refer to the uncompressed bytes of
the file as its source distributes it; every file read is verified (once per path, size and modification time)
and a mismatch raises :class:`~dpfair.exceptions.ChecksumError`.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import os
import shutil
import tempfile
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from dpfair.exceptions import ChecksumError, DataNotFoundError

ENV_VAR = "DPFAIR_DATA"
EMBEDDED_DIR = Path(__file__).resolve().parent / "embedded"
DOWNLOAD_TIMEOUT_S = 15.0

# (path, size, mtime_ns) -> hex digest already verified, so repeated loads skip re-hashing.
_VERIFIED: dict[tuple[str, int, int], str] = {}


@dataclass(frozen=True)
class DataFile:
    """One raw file of a data set.

    ``name`` is the path inside the data set's folder (``"kaggle/bank.csv"``); ``sha256`` (or ``md5`` where the
    source publishes only that) is the digest of the uncompressed bytes; ``url`` is the canonical download location
    (``None`` when the source needs a manual download); ``member`` names the file inside ``url`` when that is a zip
    archive; ``embedded`` says a gzip copy ships with the package; ``homepage`` tells where to get a file that has
    no ``url``.
    """

    folder: str
    name: str
    sha256: str | None
    url: str | None
    md5: str | None = None
    member: str | None = None
    embedded: bool = False
    homepage: str | None = None

    @property
    def algorithm(self) -> str:
        return "sha256" if self.sha256 else "md5"

    @property
    def digest(self) -> str:
        return self.sha256 or self.md5 or ""


def resolve_home(home=None) -> Path:
    """The folder holding the raw data: ``home`` if given, else ``$DPFAIR_DATA``, else ``~/.cache/dpfair``."""
    if home is not None:
        return Path(home).expanduser()
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "dpfair"


def data_home(data_home=None) -> Path:
    """The folder holding the raw data: the argument if given, else ``$DPFAIR_DATA``, else ``~/.cache/dpfair``.

    Files lie at ``<data home>/<data set folder>/<file>`` (e.g. ``adult/adult.data``), the layout of the
    offline mirror; downloads go there too.
    """
    return resolve_home(data_home)


def _homes(home) -> list[Path]:
    """Data homes searched, in order: the explicit one only, else ``$DPFAIR_DATA`` then ``~/.cache/dpfair``."""
    if home is not None:
        return [Path(home).expanduser()]
    homes = []
    env = os.environ.get(ENV_VAR)
    if env:
        homes.append(Path(env).expanduser())
    homes.append(Path.home() / ".cache" / "dpfair")
    return homes


def _download(url: str, dest: Path) -> None:
    """Fetch ``url`` into ``dest`` (tests replace this function so that they never touch the network)."""
    with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_S) as response, open(dest, "wb") as out:
        shutil.copyfileobj(response, out)


def _candidates(folder: Path, name: str) -> list[Path]:
    return [folder / name, folder / (name + ".gz")]


def _first_existing(paths: Sequence[Path]) -> Path | None:
    return next((p for p in paths if p.is_file()), None)


def _read_logical(path: Path, file: DataFile) -> bytes:
    """The file's bytes as its source distributes them (a ``<name>.gz`` stand-in is decompressed)."""
    raw = path.read_bytes()
    if path.name.endswith(".gz") and not file.name.endswith(".gz"):
        raw = gzip.decompress(raw)
    return raw


def _verify(path: Path, file: DataFile, content: bytes) -> None:
    if not file.digest:
        return
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if _VERIFIED.get(key) == file.digest:
        return
    actual = hashlib.new(file.algorithm, content).hexdigest()
    if actual != file.digest:
        where = "uncompressed content of " if path.name != Path(file.name).name else ""
        raise ChecksumError(
            f"{where}{path} has {file.algorithm} {actual}, expected {file.digest} ({file.folder}/{file.name}); "
            f"the file is corrupt or a different version: delete it and download it again"
            + (f" from {file.url}" if file.url else "")
        )
    _VERIFIED[key] = file.digest


def _fetch_download(file: DataFile, home: Path) -> Path:
    """Download ``file`` into ``home``; return its path. Raises ``OSError`` (or a ``ValueError``) on failure."""
    dest = home / file.folder / file.name
    created = [d for d in (dest.parent, *dest.parent.parents) if not d.exists()]
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        return _download_into(file, dest)
    except BaseException:
        for folder in created:  # a failed download leaves no empty folders behind
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise


def _download_into(file: DataFile, dest: Path) -> Path:
    with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
        tmp_file = Path(tmp) / "download"
        _download(file.url, tmp_file)
        if file.member:
            with zipfile.ZipFile(tmp_file) as archive:
                members = [m for m in archive.namelist() if Path(m).name == Path(file.member).name]
                if not members:
                    raise OSError(f"{file.url} has no member {file.member}")
                tmp_file.write_bytes(archive.read(members[0]))
        content = tmp_file.read_bytes()
        actual = hashlib.new(file.algorithm, content).hexdigest()
        if file.digest and actual != file.digest:
            raise ChecksumError(
                f"{file.url} downloaded with {file.algorithm} {actual}, expected {file.digest}; the source changed "
                f"or the download was cut short: try again, or put a correct copy at {dest}"
            )
        os.replace(tmp_file, dest)
    return dest


def _not_found(file: DataFile, searched: list[Path], home: Path, reason: str) -> DataNotFoundError:
    return DataNotFoundError(
        f"data file {file.name!r} of {file.folder!r} not found "
        f"(searched: {', '.join(str(p) for p in searched)}){reason}; "
        f"download it from {file.url or file.homepage} and put it at {home / file.folder / file.name} (or gzip it "
        f"to {Path(file.name).name}.gz), or point $DPFAIR_DATA, data_home= or path= at a folder holding it"
    )


def _search_list(file: DataFile, primary: bool, path, home) -> list[Path]:
    """Where ``file`` may lie, in order of preference (the embedded copy last)."""
    if path is not None:
        explicit = Path(path).expanduser()
        if explicit.is_file():
            return [explicit] if primary else _candidates(explicit.parent, file.name)
        return _candidates(explicit, file.name)
    searched = [c for h in _homes(home) for c in _candidates(h / file.folder, file.name)]
    if file.embedded:
        searched.append(EMBEDDED_DIR / (Path(file.name).name + ".gz"))
    return searched


def fetch(files: Sequence[DataFile], *, path=None, data_home=None, download: bool = True) -> list[bytes]:
    """Return the verified bytes of each of ``files`` (the first is the loader's primary file).

    Raises :class:`DataNotFoundError` if a file is nowhere to be found (and cannot be downloaded; nothing is
    downloaded when an explicit ``path`` is given) and :class:`ChecksumError` if a file's digest differs from the
    published one.
    """
    home = resolve_home(data_home)
    contents = []
    for i, file in enumerate(files):
        searched = _search_list(file, i == 0, path, data_home)
        found = _first_existing(searched)
        if found is None:
            if path is not None:
                raise _not_found(file, searched, home, " under the explicit path")
            if not download or file.url is None:
                reason = "; downloading is switched off" if not download else "; it has no download URL"
                raise _not_found(file, searched, home, reason)
            try:
                found = _fetch_download(file, home)
            except ChecksumError:
                raise
            except Exception as exc:  # offline, HTTP error, read-only data home, bad archive
                raise _not_found(file, searched, home, f"; downloading it failed ({exc})") from exc
        content = _read_logical(found, file)
        _verify(found, file, content)
        contents.append(content)
    return contents


def locate(files: Sequence[DataFile], *, path=None, data_home=None) -> list[Path | None]:
    """Where :func:`fetch` reads each of ``files`` from (``None``: nowhere on disk), for messages naming the file."""
    return [_first_existing(_search_list(file, i == 0, path, data_home)) for i, file in enumerate(files)]


def is_available(files: Sequence[DataFile], *, path=None, data_home=None) -> bool:
    """Whether every file can be read without downloading (checksums are not checked here)."""
    return all(found is not None for found in locate(files, path=path, data_home=data_home))
