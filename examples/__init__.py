"""Examples of loopctl in use; ``support_agent`` is the sample agent the docs and tests use."""
