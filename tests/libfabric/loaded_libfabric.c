/*
 * After MPI_Init (so the MTL or BTL chosen has opened its provider), prints which
 * libfabric this rank runs: "rank R: fi_version MAJOR.MINOR" and one
 * "rank R: mapped PATH" per libfabric file in /proc/self/maps. A message goes
 * round the ranks so the transport is really used.
 */
#include <mpi.h>
#include <rdma/fabric.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
	int rank, size, token = 0;
	char line[4096], last[4096] = "";
	FILE *maps;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (rank == 0) {
		token = 42;
		MPI_Send(&token, 1, MPI_INT, 1 % size, 7, MPI_COMM_WORLD);
		MPI_Recv(&token, 1, MPI_INT, size - 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	} else {
		MPI_Recv(&token, 1, MPI_INT, rank - 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		token++;
		MPI_Send(&token, 1, MPI_INT, (rank + 1) % size, 7, MPI_COMM_WORLD);
	}
	printf("rank %d: token %d\n", rank, token);
	printf("rank %d: fi_version %u.%u\n", rank, FI_MAJOR(fi_version()), FI_MINOR(fi_version()));
	maps = fopen("/proc/self/maps", "r");
	while (maps && fgets(line, sizeof(line), maps)) {
		char *path = strchr(line, '/');
		if (!path || !strstr(path, "libfabric.so"))
			continue;
		path[strcspn(path, "\n")] = '\0';
		if (strcmp(path, last) != 0)
			printf("rank %d: mapped %s\n", rank, path);
		strncpy(last, path, sizeof(last) - 1);
	}
	if (maps)
		fclose(maps);
	MPI_Finalize();
	return 0;
}
