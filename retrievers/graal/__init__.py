"""GRAAL graph retrieval: entity linking, frames, corpus graph, paths between claim entities."""
