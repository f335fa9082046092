"""Framing and the providers' wires: SSE and event-stream scanners (with their C twins), the steady lane, profiles."""
