"""``python -m examples.model_server [--port N] [--api-key KEY] [--delay S]``: serve on
127.0.0.1 until Ctrl-C."""

from __future__ import annotations

import argparse
import sys

from examples.model_server.server import ModelServer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m examples.model_server",
        description="A deterministic travel-agent model on 127.0.0.1 (OpenAI Chat Completions, "
        "Anthropic Messages and OpenAI Responses wire formats).",
    )
    parser.add_argument("--port", type=int, default=8765, help="port on 127.0.0.1 (0: a free one)")
    parser.add_argument("--api-key", default=None, help="accept only this key (default: any)")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds to wait before answering")
    args = parser.parse_args(argv)
    try:
        server = ModelServer(args.port, api_key=args.api_key, delay=args.delay)
    except OSError as exc:
        print(f"error: cannot listen on 127.0.0.1:{args.port}: {exc}", file=sys.stderr)
        return 2
    print(f"serving on {server.url} (Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
