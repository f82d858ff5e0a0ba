"""LLM prompt templates (files), versioned and hashed into cache keys; filled by the LLM stages."""
