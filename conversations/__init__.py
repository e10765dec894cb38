"""Conversation memory: chat turns accumulate, are cut into MemCells and become episodes and atomic facts.

    segmentation.py   hard limits (tokens, messages) and packing of complete segments
    boundaries.py     where a topic ends: an LLM, or time gaps and embedding topic shifts
    consolidation.py  what a new fact does: add, merge into a duplicate, supersede an older one
    actions.py        the writes: accumulate, flush, extract a MemCell, delete by id or scope
"""
