"""Entities: who and what the memories name (people, organisations, places, works, dates, amounts)."""
