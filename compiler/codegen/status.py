"""The status codes compiled functions return (0 is success), shared by every backend
and by the code that calls them."""

STATUS = {"out of memory": 1, "negative integer power": 2}
OUT_OF_BOUNDS = 1000  # debug builds: status OUT_OF_BOUNDS + k means access_sites(...)[k] went out of bounds
