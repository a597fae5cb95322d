"""An image file's bytes to the image stored: sniffing, decoding, orienting, resizing, encoding;
boxes and masks placed with the pixels.
"""
