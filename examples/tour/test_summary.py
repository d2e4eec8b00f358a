"""The validation of `summarise` and part of the goal's acceptance check."""
import unittest


class SummaryTest(unittest.TestCase):
    def test_summary_names_every_item_and_the_total(self):
        with open("summary.md", encoding="utf-8") as f:
            text = f.read()
        for word in ("coffee", "croissant", "juice", "7.45"):
            self.assertIn(word, text)


if __name__ == "__main__":
    unittest.main()
