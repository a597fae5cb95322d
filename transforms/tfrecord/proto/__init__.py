"""The Example proto: example.proto, and example_pb2.py generated from it for the read side."""
