"""The local runner's forms of the conversion's stages: the same pure functions the Beam steps
(transforms/beam/) wrap, run on this machine's cores without Beam."""
