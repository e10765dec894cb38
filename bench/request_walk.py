"""One search request followed through the code: how often it comes back to a file it had left.

    .venv/bin/python -m bench.request_walk [--convs 0] [--sessions 2] [--method hybrid] [--json]

Ingests the first sessions of a LoCoMo conversation into a fresh embedded stack (no LLM), asks one
question through the REST API to warm every lazy load, then asks another with a line tracer on the
request thread (the engine calls' own threads are left out: they are leaves). The trace is the
project's functions the request calls, outside Django, DRF and the libraries; a *stay* is
a run of one file in a depth-first walk of the request's call tree (each distinct function a caller
calls counted once, so a loop is read once), and a *return* is a stay in a file the walk had already
left. Issue 38 counted 48 stays in 18 files, 30 of them returns, by hand; this counts every function,
helpers included: compare checkouts with this script, not with those figures.
Run it from each checkout's root (`cd <checkout> && .venv/bin/python <this file>`).
"""

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path.cwd()
QUESTIONS = ("When did Caroline go to the LGBTQ support group?", "What did Melanie paint recently?")


class Call:
    """A project function in the request's call tree; each distinct callee is kept once per caller."""

    def __init__(self, file: str, name: str):
        self.file, self.name, self.children = file, name, {}

    def child(self, file: str, name: str) -> "Call":
        return self.children.setdefault((file, name), Call(file, name))


def walk(client, body: dict, prefixes: tuple[str, ...]) -> list[str]:
    """The files a reader passes through following the request's calls: the call tree of the project's
    functions (libraries' frames skipped, a loop's repeated calls to one function counted once),
    walked depth first — into each callee's file and back to the caller's — as runs of one file."""
    known: dict[str, str | None] = {}
    root = Call("", "")
    stack = [root]

    def relative(filename: str) -> str | None:
        if filename not in known:
            try:
                rel = str(Path(filename).resolve().relative_to(ROOT))
            except ValueError:
                rel = None
            known[filename] = rel if rel and rel.startswith(prefixes) else None
        return known[filename]

    def profiler(frame, event, arg):
        if event not in ("call", "return"):
            return
        rel = relative(frame.f_code.co_filename)
        if rel is None:
            return
        if event == "call":
            stack.append(stack[-1].child(rel, frame.f_code.co_qualname))
        elif len(stack) > 1:
            stack.pop()

    sys.setprofile(profiler)
    try:
        response = client.post("/api/v1/memories/search", body, format="json")
    finally:
        sys.setprofile(None)
    assert response.status_code == 200, response.content[:300]
    files: list[str] = []

    def enter(node: Call) -> None:
        files.append(node.file)
        for child in node.children.values():
            enter(child)
            files.append(node.file)

    for top in root.children.values():
        enter(top)
    return _runs(files)


def summary(stays: list[str]) -> dict:
    seen, returns = set(), 0
    for f in stays:
        returns += f in seen
        seen.add(f)
    return {"stays": len(stays), "files": len(seen), "returns": returns,
            "most_entered": Counter(stays).most_common(8)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--convs", type=int, default=0, help="LoCoMo conversation index (default 0)")
    parser.add_argument("--sessions", type=int, default=2, help="sessions ingested (default 2)")
    parser.add_argument("--method", default="hybrid")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from bench.harness import SHARED_DATA, api_client, close_stack, conversation_stack, post_session
    from bench.locomo import load

    var = conversation_stack(None)
    try:
        conv = load(SHARED_DATA / "locomo" / "locomo10_dev.json", [args.convs])[0]
        stats = Counter()
        client = api_client()
        for session in conv["sessions"][: args.sessions]:
            messages = [{"message_id": t["dia_id"], "sender_id": t["speaker"], "sender_name": t["speaker"],
                         "content": t["text"], "timestamp": t["timestamp"].isoformat()} for t in session["turns"]]
            post_session(client, "walker", f"s{session['number']}", messages, stats)
        body = {"query": QUESTIONS[0], "method": args.method, "top_k": 10, "filters": {"user_id": "walker"}}
        client.post("/api/v1/memories/search", body, format="json")  # warm: models, indexes, caches
        project = ("retrieval/", "entities/", "memory/", "tenants/", "conversations/", "common/", "loci/")
        everything = walk(client, {**body, "query": QUESTIONS[1]}, project)
        search_only = [f for f in everything if f.startswith("retrieval/")]
        report = {"messages": stats["messages"], "project": summary(everything),
                  "retrieval": summary(_runs(search_only))}
    finally:
        close_stack(var, keep=False)
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        for key in ("project", "retrieval"):
            r = report[key]
            print(f"{key}: {r['stays']} stays in {r['files']} files, {r['returns']} returns to a file already left")
            print("   most entered: " + ", ".join(f"{f} {n}" for f, n in r["most_entered"]))
    return 0


def _runs(files: list[str]) -> list[str]:
    """Consecutive repeats merged (a stay in a file outside retrieval/ between two of the same file)."""
    return [f for i, f in enumerate(files) if i == 0 or files[i - 1] != f]


if __name__ == "__main__":
    sys.exit(main())
