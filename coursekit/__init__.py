"""Shared helpers for the PyTorch autograd and hooks course."""
