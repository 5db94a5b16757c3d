"""Model providers over httpx, one module each, behind ``loopctl.api.ApiClient``.

- ``OpenAIClient``: OpenAI Chat Completions and the servers that speak it (DeepSeek,
  OpenRouter, Groq, Gemini, vLLM, llama.cpp, LM Studio, Ollama's ``/v1``) via ``base_url``.
- ``OpenAIResponsesClient``: OpenAI's Responses API (stateless, reasoning items sent back).
- ``AnthropicClient``: Anthropic Messages.
- ``OllamaClient``: Ollama's native ``/api/chat``.

Each takes ``model`` and optional ``api_key``, ``base_url``, ``http_client`` (an injected
``httpx.AsyncClient``), ``stream`` (False: one non-streaming request, the same events),
``options`` and ``provider`` (the key of the reasoning and provider parts it keeps and sends
back; by default from the host). Every failure is an ``ApiError`` whose ``LoopError`` kind
classifies it, naming the real provider or host; the retry hints of the response ride along.
See docs/providers.md.
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
