"""Task `build`: turn prices.csv into prices.json (amounts in cents)."""
import csv
import json

with open("prices.csv", newline="", encoding="utf-8") as f:
    rows = list(csv.DictReader(f))
prices = {r["item"]: round(float(r["price"]) * 100) for r in rows}
with open("prices.json", "w", encoding="utf-8") as f:
    json.dump(prices, f, indent=2, sort_keys=True)
print(f"wrote prices.json: {len(prices)} items")
