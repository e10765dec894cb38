"""WebVTT captions as cue blocks grouped into fixed time windows; chapter tracks as one section per chapter."""

import html
import re
import statistics
from dataclasses import dataclass
from pathlib import Path

from .base import Block, ParsedDocument, ParseError, Section
from .charset import decode_bytes

# One minute of speech (~150 words) is a useful parent chunk for a transcript.
WINDOW_SECONDS = 60.0

_TIMESTAMP = r"(?:(\d+):)?(\d{1,2}):(\d{2})[.,](\d{1,3})"
_TIMING = re.compile(rf"^\s*{_TIMESTAMP}\s*-->\s*{_TIMESTAMP}")
_VOICE = re.compile(r"<v(?:\.[^\s>]*)?\s+([^>]+)>")
_TAG = re.compile(r"</?[^>]*>")


@dataclass
class Cue:
    start: float
    end: float
    text: str
    speaker: str
    identifier: str


def _seconds(hours: str | None, minutes: str, seconds: str, fraction: str) -> float:
    return int(hours or 0) * 3600 + int(minutes) * 60 + int(seconds) + int(fraction.ljust(3, "0")) / 1000


def clock(seconds: float) -> str:
    whole = int(seconds)
    return f"{whole // 3600:02d}:{whole % 3600 // 60:02d}:{whole % 60:02d}"


def _cue_text(lines: list[str]) -> tuple[str, str]:
    """(text, speaker): voice tags name the speaker, every other tag is markup to strip."""
    speakers: list[str] = []
    out = []
    for line in lines:
        voice = _VOICE.search(line)
        if voice:
            name = voice.group(1).strip()
            if name not in speakers:
                speakers.append(name)
        text = html.unescape(_TAG.sub("", line)).replace("\u200e", "").replace("\u200f", "").strip()
        if text:
            # With several voices in one cue, each line keeps its own speaker.
            out.append((voice.group(1).strip(), text) if voice else ("", text))
    if len(speakers) > 1:
        return "\n".join(f"{who}: {text}" if who else text for who, text in out), ", ".join(speakers)
    return "\n".join(text for _, text in out), speakers[0] if speakers else ""


def read_cues(text: str) -> list[Cue]:
    cues = []
    for chunk in re.split(r"\n[ \t]*\n", text):
        lines = [line for line in chunk.split("\n") if line.strip()]
        if not lines or lines[0].startswith(("WEBVTT", "NOTE", "STYLE", "REGION")):
            continue
        timing_at = next((i for i, line in enumerate(lines) if "-->" in line), None)
        if timing_at is None or timing_at > 1:
            continue
        match = _TIMING.match(lines[timing_at])
        if not match:
            continue
        start, end = _seconds(*match.groups()[:4]), _seconds(*match.groups()[4:])
        body, speaker = _cue_text(lines[timing_at + 1 :])
        if body:
            identifier = lines[0].strip() if timing_at == 1 else ""
            cues.append(Cue(start=start, end=max(end, start), text=body, speaker=speaker, identifier=identifier))
    return cues


def _block(cue: Cue) -> Block:
    metadata = {"cue_id": cue.identifier} if cue.identifier else {}
    return Block(
        text=cue.text, kind="cue", start_time=cue.start, end_time=cue.end, speaker=cue.speaker, metadata=metadata
    )


def _is_chapters(cues: list[Cue], filename: str) -> bool:
    if "chapter" in filename.lower():
        return True
    # Chapter tracks: a short single-line title per cue, each covering a long stretch of the video.
    return (
        all("\n" not in c.text and len(c.text) <= 80 for c in cues)
        and statistics.median(c.end - c.start for c in cues) >= 20
        and len(cues) < 200
    )


def parse(path: Path, *, filename: str) -> ParsedDocument:
    """Parse WebVTT captions (or SRT) into ~WINDOW_SECONDS sections of cue blocks."""
    text = decode_bytes(path.read_bytes()).text.lstrip("\ufeff")
    if not text.strip():
        raise ParseError("The file is empty.")
    cues = read_cues(text)
    if not cues:
        raise ParseError("The WebVTT file has no cues with text.")
    stem = Path(filename).stem
    if _is_chapters(cues, filename):
        sections = [
            Section(
                title=cue.text,
                section_path=[stem, cue.text],
                blocks=[_block(cue)],
                start_time=cue.start,
                end_time=cue.end,
                metadata={"chapter": n},
            )
            for n, cue in enumerate(cues, start=1)
        ]
        kind = "chapters"
    else:
        windows: dict[int, list[Cue]] = {}
        for cue in cues:
            windows.setdefault(int(cue.start // WINDOW_SECONDS), []).append(cue)
        sections = []
        for index, window in sorted(windows.items()):
            start, end = index * WINDOW_SECONDS, (index + 1) * WINDOW_SECONDS
            title = f"{clock(start)}–{clock(end)}"
            blocks = [_block(cue) for cue in window]
            sections.append(
                Section(title=title, section_path=[stem, title], blocks=blocks, start_time=start, end_time=end)
            )
        kind = "captions"
    speakers = sorted({cue.speaker for cue in cues if cue.speaker})
    metadata = {"kind": kind, "cues": len(cues), "duration": max(c.end for c in cues), "speakers": speakers}
    return ParsedDocument(detected_type="vtt", sections=sections, metadata=metadata)
