"""The record: the append-only audit log (Vivaria trace entries), the score log, and exports."""
