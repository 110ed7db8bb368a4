"""Evaluation library: deterministic checks, python hooks, the LLM judge and aggregation.

Pure functions over explicit inputs (RunArtifact dict, captured files, config specs); no store and
no caching here: the build layer turns each step into a node with its own key.
"""
