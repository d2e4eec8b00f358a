"""The validation of `build` and part of the goal's acceptance check."""
import json
import unittest


class PricesTest(unittest.TestCase):
    def test_amounts_are_cents(self):
        with open("prices.json", encoding="utf-8") as f:
            prices = json.load(f)
        self.assertEqual(prices, {"coffee": 240, "croissant": 190, "juice": 315})


if __name__ == "__main__":
    unittest.main()
