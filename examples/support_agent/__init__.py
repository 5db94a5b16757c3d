"""The sample support agent (``agent.build``), its shipped traces, the script recording them."""
