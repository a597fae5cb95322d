"""Archives as inputs: tar and zip files read as folders of images, without unpacking."""
