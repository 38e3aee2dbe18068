// A fixture for check_includes.py: Target.cpp includes Emitter.h, whose
// source includes Target.h: a cycle of two nodes.
