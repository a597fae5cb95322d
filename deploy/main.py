"""Flex Template entry point: the launcher runs `python main.py --param=value ...`."""

import sys

from tfrecord_pipeline.cli.main import main

if __name__ == "__main__":
    sys.exit(main(["convert", *sys.argv[1:]]))
