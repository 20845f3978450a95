"""Where an environment runs: one small interface, a Docker and a local implementation."""

from .base import ExecResult, Runtime, Sandbox, SandboxSpec

__all__ = ["ExecResult", "Runtime", "Sandbox", "SandboxSpec"]
