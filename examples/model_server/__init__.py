"""A deterministic local model server for the travel agent example and the acceptance tests.

``ModelServer`` (``with ModelServer() as server: ... server.url``) answers on 127.0.0.1 in the
real wire formats of OpenAI Chat Completions, Anthropic Messages and OpenAI Responses, streamed
or whole, playing the small travel model of ``travel_model``. From a shell::

    python -m examples.model_server --port 8765
"""

from examples.model_server.server import ModelServer, Received
from examples.model_server.travel_model import Call, Move, Result, Turn, decide

__all__ = ["Call", "ModelServer", "Move", "Received", "Result", "Turn", "decide"]
