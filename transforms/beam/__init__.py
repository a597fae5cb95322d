"""The thin Beam steps over the pure logic, and the coder of the rows that cross a shuffle."""
