"""Model providers over httpx, one module each, behind ``loopctl.api.ApiClient``."""
