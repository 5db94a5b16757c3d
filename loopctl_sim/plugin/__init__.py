"""The pytest plugin (``loopctl_sim.plugin.pytest_plugin``, loaded through the ``pytest11`` entry
point ``loopctl``): fixtures and markers for users' own tests.

It sits at the top of the harness beside the command line and may import every layer below.
"""
