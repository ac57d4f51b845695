#!/usr/bin/env python3
"""tools/problem_check's reading of kernel sources: a kernel's signature as
the compiler sees it under the plan's params (#if branches, the source's own
#defines, continued lines), and the errors it gives for what it cannot read."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools", "problem_check"))
import problem_lib as L  # noqa: E402

SOURCE = r'''
#ifndef RES
#define RES 0
#endif
#define TWICE (2 * RES)
extern "C" __global__ void __launch_bounds__(64, 1)
#if TWICE == 2 && \
    defined(RES)
k(const float* X, const float* R, float* Y, int n) {
#elif RES > 1
k(const float* X, int n) {
#else
k(const float* X, float* Y, int n) {
#endif
}
'''


class ActiveSource(unittest.TestCase):
    def names(self, params):
        return [name for _, name in L.kernel_signature(SOURCE, "k", params)]

    def test_the_branch_the_params_select(self):
        self.assertEqual(self.names({}), ["X", "Y", "n"])  # the source's own default
        self.assertEqual(self.names({"RES": 1}), ["X", "R", "Y", "n"])
        self.assertEqual(self.names({"RES": 2}), ["X", "n"])

    def test_line_numbers_are_kept(self):
        self.assertEqual(L.active_source(SOURCE, {}).count("\n"), SOURCE.count("\n"))

    def test_c_arithmetic_and_function_like_macros(self):
        # C's division truncates toward zero (Python's // would give -2).
        self.assertIn("a", L.active_source("#if -3 / 2 == -1\na\n#endif\n", {}))
        # A function-like macro defines nothing, not even a prefix of its name.
        self.assertNotIn("a", L.active_source("#define FOO(x) x\n#if FO\na\n#endif\n", {}))

    def test_what_it_cannot_read_is_an_error(self):
        with self.assertRaises(L.CheckError):
            L.active_source("#if 1 / RES\n#endif\n", {"RES": 0})
        with self.assertRaises(L.CheckError):
            L.active_source("#endif\n", {})
        with self.assertRaises(L.CheckError):
            L.active_source('#if X == "a"\n#endif\n', {})


if __name__ == "__main__":
    unittest.main()
