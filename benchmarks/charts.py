"""The benchmark's bar charts (bench-N.png) as PNG bytes, drawn with Pillow (no plotting
dependency)."""

import io

from PIL import Image, ImageDraw

BAR = (66, 133, 244)


def bar_chart(bars: list[tuple[str, float]], title: str, highlight=lambda label: True) -> bytes:
    """One bar per (label, value), longest = widest; `highlight` picks the blue bars."""
    width, row, left = 720, 22, 180
    image = Image.new("RGB", (width, row * max(1, len(bars)) + 36), "white")
    draw = ImageDraw.Draw(image)
    draw.text((10, 8), title, fill="black")
    top = max((value for _, value in bars), default=0) or 1
    for index, (label, value) in enumerate(bars):
        y = 28 + index * row
        length = int((width - left - 90) * value / top)
        colour = BAR if highlight(label) else (160, 160, 160)
        draw.text((10, y + 4), str(label)[:28], fill="black")
        draw.rectangle((left, y + 3, left + length, y + row - 4), fill=colour)
        draw.text((left + length + 6, y + 4), f"{value:,.0f}", fill="black")
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return buffer.getvalue()
