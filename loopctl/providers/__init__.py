"""Model providers over httpx, one module each, behind ``loopctl.api.ApiClient``: OpenAI Chat
Completions and the servers that speak it (``OpenAIClient``), OpenAI Responses, Anthropic
Messages, Ollama's native ``/api/chat``.

Each takes ``model`` and optional ``api_key``, ``base_url``, ``http_client`` (injected),
``stream``, ``options`` and ``provider`` (the key of the parts it keeps and sends back). Every
failure is an ``ApiError`` whose ``LoopError`` kind classifies it. See docs/providers.md.
"""

from loopctl.providers._anthropic import AnthropicClient
from loopctl.providers._common import HttpProvider
from loopctl.providers._errors import MissingApiKeyError
from loopctl.providers._ollama import OllamaClient
from loopctl.providers._openai import OpenAIClient
from loopctl.providers._openai_responses import OpenAIResponsesClient

__all__ = [
    "AnthropicClient",
    "HttpProvider",
    "MissingApiKeyError",
    "OllamaClient",
    "OpenAIClient",
    "OpenAIResponsesClient",
]
