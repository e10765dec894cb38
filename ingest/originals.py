"""A stored original as a local file, whatever the storage: parsers (PyMuPDF, LibreOffice, tesseract) need a path."""

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ingest.parsing.base import ParseError, TransientParseError

_COPY_BUFFER = 1024 * 1024


@contextmanager
def local_original(field) -> Iterator[Path]:
    """The original's path: the stored file itself on disk storage, else a temporary copy removed afterwards.

    A missing object is a ParseError (the document fails with a reason); a storage that does not answer
    (an object store that is down or slow) is transient, so the stage is retried with backoff.
    """
    if not field.name:
        raise ParseError("The original file is missing from storage.")
    try:
        path = field.path  # FileSystemStorage; object stores raise NotImplementedError
    except NotImplementedError:
        path = None
    if path is not None:
        if not Path(path).is_file():
            raise ParseError("The original file is missing from storage.")
        yield Path(path)
        return
    # The suffix keeps the name's extension for parsers that look at it (detection reads content first).
    with tempfile.NamedTemporaryFile(prefix="loci-original-", suffix=Path(field.name).suffix) as copy:
        try:
            with field.storage.open(field.name, "rb") as source:
                shutil.copyfileobj(source, copy, _COPY_BUFFER)
        except FileNotFoundError:
            raise ParseError("The original file is missing from storage.") from None
        except Exception as exc:  # botocore's errors share no base class with OSError
            raise TransientParseError(f"Could not read the original from storage: {type(exc).__name__}: {exc}",
                                      engine="The storage of originals") from exc
        copy.flush()
        yield Path(copy.name)
