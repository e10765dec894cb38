"""LibreOffice headless conversions of legacy Office files, and password sniffing of Office containers."""

import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import olefile

from .base import ParsedDocument, ParseError, TransientParseError

# A cold start with a fresh profile takes ~1.5 s; big decks take tens of seconds. Past 120 s the machine
# is overloaded or LibreOffice is stuck on a dialog it cannot show, both worth a later retry.
CONVERT_TIMEOUT = 120.0


@contextmanager
def converted(path: Path, to: str, *, filename: str, timeout: float = CONVERT_TIMEOUT) -> Iterator[Path]:
    """Convert with `soffice --convert-to <to>`; yields the output file, removed on exit."""
    with tempfile.TemporaryDirectory(prefix="loci-soffice-") as tmp:
        workdir = Path(tmp)
        # The stored upload may have no extension; LibreOffice picks its import filter partly by name.
        source = workdir / "in" / f"document{Path(filename).suffix.lower() or path.suffix.lower()}"
        source.parent.mkdir()
        shutil.copyfile(path, source)
        outdir = workdir / "out"
        # Each conversion gets its own profile: concurrent soffice processes sharing one profile
        # attach to the same instance and silently drop files.
        cmd = [
            "soffice",
            f"-env:UserInstallation={(workdir / 'profile').as_uri()}",
            "--headless",
            "--norestore",
            "--nolockcheck",
            "--convert-to",
            to,
            "--outdir",
            str(outdir),
            str(source),
        ]
        output = _run(cmd, timeout)
        result = outdir / f"{source.stem}.{to.split(':')[0]}"
        if not result.is_file() or result.stat().st_size == 0:
            raise ParseError(f"LibreOffice could not convert the file ({_reason(output)}).")
        yield result


def _run(cmd: list[str], timeout: float) -> str:
    try:
        # A new session lets a timeout kill soffice.bin too, not just the oosplash launcher.
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    except FileNotFoundError as exc:
        raise ParseError("Converting this format needs LibreOffice, which is not installed on this server.") from exc
    try:
        stdout, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise TransientParseError(f"LibreOffice did not finish the conversion within {timeout:g} s.") from exc
    return stdout.decode("utf-8", "replace")


def _reason(output: str) -> str:
    lines = [line.strip() for line in output.splitlines() if line.strip() and "javaldx" not in line]
    errors = [line for line in lines if line.lower().startswith("error")]
    return (errors or lines or ["no output file was produced"])[-1][:200]


def reject_encrypted(path: Path, kind: str) -> None:
    """Raise ParseError for a password-protected OOXML file (Office wraps those in an OLE container)."""
    try:
        if not olefile.isOleFile(str(path)):
            return
        with olefile.OleFileIO(str(path)) as ole:
            encrypted = ole.exists("EncryptionInfo") or ole.exists("EncryptedPackage")
    except Exception:  # a broken OLE header: let the format parser report the damage
        return
    if encrypted:
        raise ParseError(f"The {kind} is password-protected.")


def is_ole(path: Path) -> bool:
    """True for an OLE compound file, the container of legacy .doc/.ppt/.xls."""
    try:
        return olefile.isOleFile(str(path))
    except OSError:
        return False


def is_ooxml(path: Path) -> bool:
    """True when a .doc/.ppt/.xls is really a zip package (misnamed .docx/.pptx/.xlsx)."""
    # Not zipfile.is_zipfile: it finds the zipped theme that Word embeds inside OLE .doc files.
    try:
        with open(path, "rb") as file:
            return file.read(4) == b"PK\x03\x04"
    except OSError:
        return False


def parse_legacy(path: Path, *, filename: str, legacy: str, kind: str, parse) -> ParsedDocument:
    """A legacy OLE .doc/.ppt: converted to its OOXML twin by LibreOffice and read with `parse`.

    A zip package misnamed with the legacy extension is read directly."""
    if is_ooxml(path):
        return parse(path, filename=filename)
    if not is_ole(path):
        raise ParseError(f"The file is not a legacy .{legacy} {kind}.")
    reject_encrypted(path, kind)
    with converted(path, f"{legacy}x", filename=filename) as twin:
        parsed = parse(twin, filename=filename)
    parsed.detected_type = legacy
    return parsed
