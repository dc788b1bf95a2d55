// m3idx: generate, run, check and time indexer cases from the command line. The CLI lives in
// libm3idx.so beside the API (one copy of the in-process compiler); this is its launcher.
extern "C" int m3idx_cli_main(int argc, char **argv);

int main(int argc, char **argv) { return m3idx_cli_main(argc, argv); }
