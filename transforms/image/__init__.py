"""An image file to the image stored: its bytes read (or the reason they cannot be), then
sniffing, decoding, orienting, resizing, encoding; boxes and masks placed with the pixels.
"""
