/* Prints what libibverbs' pure helpers return (rate conversions, the *_str
 * functions) over and beyond their enums' ranges. tests/api/helpers.rs runs it
 * over Debian's libibverbs and over rddp's and compares the two outputs. */
#include <stdio.h>
#include <infiniband/verbs.h>
int main(void) {
	for (int r = 0; r <= 26; r++)
		printf("rate %d mult %d mbps %d\n", r, ibv_rate_to_mult(r), ibv_rate_to_mbps(r));
	int mults[] = {0, 1, 2, 4, 8, 10, 11, 12, 16, 20, 24, 32, 40, 48, 80, 120, 160, 240, 320, 480, 7};
	for (unsigned i = 0; i < sizeof mults / sizeof *mults; i++)
		printf("mult %d rate %d\n", mults[i], mult_to_ibv_rate(mults[i]));
	int mbps[] = {0, 2500, 5000, 10000, 14062, 25781, 28125, 53125, 56250, 103125, 112500, 168750, 206250, 309375, 425000, 637500, 850000, 1275000, 20000, 30000, 40000, 60000, 80000, 120000, 25000, 100000};
	for (unsigned i = 0; i < sizeof mbps / sizeof *mbps; i++)
		printf("mbps %d rate %d\n", mbps[i], mbps_to_ibv_rate(mbps[i]));
	for (int i = -1; i <= 25; i++) printf("wc %d %s\n", i, ibv_wc_status_str(i));
	for (int i = -1; i <= 21; i++) printf("ev %d %s\n", i, ibv_event_type_str(i));
	for (int i = -2; i <= 8; i++) printf("node %d %s\n", i, ibv_node_type_str(i));
	for (int i = -1; i <= 6; i++) printf("port %d %s\n", i, ibv_port_state_str(i));
	return 0;
}
