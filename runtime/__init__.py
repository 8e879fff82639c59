"""Loading and running compiled code. It knows nothing of the IR."""
