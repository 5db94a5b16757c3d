"""The trace format: records, their JSON Schema, the writer, the streaming reader and its fast
path, the feed codec, secret scrubbing, and the recorders that write a run as it happens.

Everything above this package (simulation, replay, properties, fuzzing, views, the command line)
reads and writes traces only through it. It may import ``loopctl`` (the brain's types, the
driver's observer types) and nothing else of ``loopctl_sim``.
"""
