// Placeholder entry point; replaced below by the real CLI.
int main() { return 0; }
