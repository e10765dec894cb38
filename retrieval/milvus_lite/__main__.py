"""`python -m retrieval.milvus_lite serve --path F --port P [--until-unused]` | `stop --path F`."""

import argparse
import sys

from retrieval.milvus_lite.client import stop_server
from retrieval.milvus_lite.server import serve


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m retrieval.milvus_lite")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("serve", help="run the Milvus Lite server in the foreground")
    run.add_argument("--path", required=True, help="Milvus Lite data file, e.g. var/milvus.db")
    run.add_argument("--port", type=int, required=True)
    run.add_argument("--until-unused", action="store_true", help="stop when no registered user process is alive")
    halt = commands.add_parser("stop", help="stop the server over a data file, whoever uses it")
    halt.add_argument("--path", required=True)
    args = parser.parse_args(argv)
    if args.command == "stop":
        return 0 if stop_server(args.path) else 1
    return serve(args.path, args.port, until_unused=args.until_unused)


if __name__ == "__main__":
    sys.exit(main())
