"""The hands: ``BareLoop`` and what it uses to do the brain's bidding.

Tools, retries, cancel, compaction: everything that does IO for the brain.
"""
